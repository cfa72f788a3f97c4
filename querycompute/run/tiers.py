"""Tiered execution: the first call of a new signature does not wait for a compiler.

While a backend's kernel compiles (or loads from the disk cache) in a background thread, the
numpy backend answers: the reference interpreter, same semantics, ready at once. Each later
call looks at the compile once (`Pending.ready`, a flag read) and moves to the kernel as soon
as it is there. A background compile that fails becomes one warning and the numpy tier keeps
answering that signature; a synchronous compile (QUERYCOMPUTE_TIERED=0, or
`q.compile(..., tiered=False)`) raises CompileError as before.

Why a thread and not a worker process: a process must import numba (about 0.4 s) and the
query layer before it can compile, then the main process must still load the result from the
disk cache; a thread starts at once and hands over the compiled object. numba holds the GIL
while it compiles, so the numpy tier's own Python steps wait for switch intervals (5 ms),
which docs/performance.md measures; the heavy NumPy loops release the GIL. Compiles run one at
a time (numba and pocl gain nothing from more), in submission order.

Imports and fork: every module a compile needs is imported before the compile begins, in one
step under one process-wide lock (`registry.load_compiler`: numba or the GPU library, the
backend's and the code generator's modules), so two threads never import them at once; the
compile thread does it first (not the calling thread: numba's import takes 0.3 s or more,
which the first answer must not wait for). A fork() waits for the compile thread's work in
flight, imports included, to end (after_fork.hold), so no lock is held and no module is half
imported in the child; there the compiles that had not finished are submitted again by
their next call.

Memory: the numpy tier of a sort, distinct, group_by or join needs many times the memory of
the kernel (int64 indices, sorted copies: up to ~24 B per element, against 0.1-1.5 for the
cpu kernels: docs/performance.md), so a first call of such a plan on NUMPY_TIER_MAX_HEAVY
elements or more waits for its compile instead.
"""
from __future__ import annotations

import threading

from .. import after_fork, config
from ..errors import BackendUnavailableError
from ..log import FallbackWarning, logger, warn
from typing import Callable

_executor = None                # a ThreadPoolExecutor, made on the first background compile
_executor_lock = threading.Lock()
# Held by the compile thread while it compiles, and by a forking thread across fork():
# a fork waits for the compile in flight (its imports, numba's and LLVM's state) to end.
_running = threading.Lock()
after_fork.hold(_running, rank=0)

# Plans that sort, hash or join (graph.heavy) answer on the numpy tier only below this
# many elements; a larger first call waits for its kernel (see the module docstring).
NUMPY_TIER_MAX_HEAVY = 1_000_000


def _after_fork() -> None:
    """A forked child has no worker thread (and maybe a held lock): make both anew."""
    global _executor, _executor_lock
    _executor, _executor_lock = None, threading.Lock()


after_fork.register(_after_fork)


def enabled_by_default() -> bool:
    """QUERYCOMPUTE_TIERED=0 turns tiering off (read on every compile: cheap, and tests and
    notebooks may flip it)."""
    return config.get("QUERYCOMPUTE_TIERED")


def _pool():
    # (concurrent.futures is imported here, not with the package: it costs ~10 ms)
    from concurrent.futures import ThreadPoolExecutor
    global _executor
    with _executor_lock:
        if _executor is None:
            # filelock (the cache's compile lock) hooks fork(): imported here, before our
            # hooks are armed (after_fork.arm), not by the compile thread while a fork waits
            import filelock  # noqa: F401
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="querycompute-compile")
            _cancel_queued_at_exit(_executor)
        return _executor


def _cancel_queued_at_exit(executor) -> None:
    """At interpreter exit Python waits for the worker thread to finish its queue. Let it
    finish the compile it is running (that fills the disk cache for the next process), but
    drop the ones not started: a script that met 100 new queries must not compile them all
    before it can exit. (threading's exit hooks run before concurrent.futures joins its
    workers when registered after it, as here; without the private hook, exit just waits.)"""
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(lambda: executor.shutdown(wait=False, cancel_futures=True))


class Pending:
    """A kernel to compile in the background. `start()` submits it (the engine calls it once
    the numpy tier has answered the first call: a compile started earlier would hold the GIL,
    importing numba and lowering, while the first answer is computed, and make it wait);
    `ready` turns True when it finished (either way); then `result()` is the compiled object,
    or None when it failed (warned once)."""
    __slots__ = ("compile_fn", "future", "what", "ready", "_warned", "_start_lock", "imports",
                 "numpy_max", "resubmit", "outcome")

    def __init__(self, compile_fn: Callable[[], object], what: str,
                 imports: Callable[[], None] | None = None, numpy_max: float = float("inf")):
        self.compile_fn = compile_fn
        self.what = what
        self.imports = imports          # registry.load_compiler, run before compile_fn
        self.numpy_max = numpy_max      # calls on this many elements or more wait for it
        self.ready = False
        self.future = None
        self.outcome = None             # (compiled object, exception) once the compile ran
        self.resubmit = False           # in a forked child: start again on the next call
        self._warned = False
        self._start_lock = threading.Lock()

    def start(self) -> None:
        """Submit the compile (once, however many threads call this)."""
        with self._start_lock:
            if self.future is None:
                self.resubmit = False
                executor = _pool()
                after_fork.arm("compile thread")     # before the thread imports anything
                self.future = executor.submit(self._compile)
                self.future.add_done_callback(self._done)

    def _compile(self):
        with _running:
            try:
                if self.imports is not None:
                    self.imports()
                value = self.compile_fn()
            except BaseException as exc:
                self.outcome = (None, exc)
                raise
            self.outcome = (value, None)
            return value

    def _done(self, _future) -> None:
        self.ready = True

    def after_fork(self) -> None:
        """In a forked child: a compile the parent finished is kept (its outcome, not its
        future, whose lock may be held); one it had not is forgotten, to be submitted again
        by the next call (the parent's compile thread is gone)."""
        if self.outcome is not None:
            self.ready = True
        elif self.future is not None or self.ready:
            self.future, self._start_lock, self.resubmit = None, threading.Lock(), True

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the compile finished (for tests, `cq.wait()` and benchmarks); starts
        it first if nothing has yet."""
        if self.ready:
            return True
        self.start()
        try:
            self.future.exception(timeout=timeout)
        except TimeoutError:
            return False
        return True

    def error(self) -> BaseException | None:
        """The exception the finished compile raised (None when it succeeded or was dropped)."""
        return None if self.outcome is None else self.outcome[1]

    def result(self):
        if self.outcome is None:              # dropped at interpreter exit: stay on numpy
            return None
        value, exc = self.outcome
        if exc is None:
            return value
        if isinstance(exc, BackendUnavailableError):
            return None                       # not a compile error: the caller decides
        if not self._warned:
            self._warned = True
            why = getattr(exc, "log", None) or str(exc)     # a CompileError's compiler log
            why = why.strip().splitlines()[0] if why.strip() else ""
            logger.info("background compile of %s failed (%s: %s); staying on the numpy tier",
                        self.what, type(exc).__name__, why)
            warn(f"querycompute: the background compile of {self.what} failed "
                 f"({type(exc).__name__}: {why}); "
                 f"the numpy backend keeps answering this query. Run it with "
                 f"QUERYCOMPUTE_TIERED=0 to see the compile error raised.", FallbackWarning)
        return None
