"""Tiered execution: the first call of a new signature does not wait for a compiler, and
never gets other bits than the kernel would give.

While a backend's kernel compiles (or loads from the disk cache) in a background thread, the
numpy backend answers: the reference interpreter, same semantics, ready at once. Each later
call looks at the compile once (`Pending.ready`, a flag read) and moves to the kernel as soon
as it is there.

Same bits: the numpy tier answers only plans whose result it computes bit for bit as the
kernel does (`differs`): elementwise work, compaction, integer and bool reductions, min /
max, any / all / first, in-order folds, and on cpu float sums and means too (the numpy tier
follows the kernel's fixed order, _codegen/sum_order.py). Where it can't (a GPU backend's
float sum, whose tree it does not reproduce; a float fold; a plan of stages or long rows
that touches floats), the first call compiles first, said in the log and by
`differs`' reason (docs/guide.md).

A disk-cache hit the backend loads in a few ms (Backend.loads_fast: the cpu backend's llvm
route) is loaded before the first call answers, which the kernel then answers
(engine._loads_fast).

A long first call switches tiers between morsels (HyPer's adaptive execution): a plan whose
partial results join exactly (`splittable`: no float sum, no float min / max, no fold) runs
MORSEL elements at a time on the numpy tier, the compile started at once, and the rest of
the input goes to the kernel as soon as it is ready (windows.TierSwitch); other plans wait
for their kernel from NUMPY_TIER_MAX_UNSPLIT elements on. A background compile that fails becomes one warning and the numpy tier keeps
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

Exit: the compile thread is a daemon thread. At interpreter exit the compiles not started
are dropped, and one in flight is waited for at most EXIT_WAIT_S seconds (it fills the disk
cache for the next process when it ends in time; the cache's writes are atomic, so a compile
cut short leaves nothing half written): a short script never waits for a compiler at exit.

Memory: the numpy tier of a sort, distinct, group_by or join needs many times the memory of
the kernel (int64 indices, sorted copies: up to ~24 B per element, against 0.1-1.5 for the
cpu kernels: docs/performance.md), so a first call of such a plan on NUMPY_TIER_MAX_HEAVY
elements or more waits for its compile instead.
"""
from __future__ import annotations

import collections
import threading

from .. import after_fork, config
from ..backends import registry
from ..errors import BackendUnavailableError
from ..log import FallbackWarning, logger, warn
from typing import Callable

_executor = None                # the _Worker, made on the first background compile
_executor_lock = threading.Lock()
# Held by the compile thread while it compiles, and by a forking thread across fork():
# a fork waits for the compile in flight (its imports, numba's and LLVM's state) to end.
_running = threading.Lock()
after_fork.hold(_running, rank=0)

# Plans that sort, hash or join (graph.heavy) answer on the numpy tier only below this
# many elements; a larger first call waits for its kernel (see the module docstring).
NUMPY_TIER_MAX_HEAVY = 1_000_000
# A first call of a plan that can't switch tiers mid-call (not `splittable`) answers on the
# numpy tier only below this many elements (~0.1-1 s of NumPy work, about a compile's time)
NUMPY_TIER_MAX_UNSPLIT = 1 << 26
MORSEL = 1 << 22                # elements per numpy-tier morsel of a long first call
EXIT_WAIT_S = 1.0               # at exit, the longest wait for a compile in flight
# Test hooks: a threading.Event every background compile waits for before it starts
# (None: none), and between_morsels(k, pending), called after the k-th numpy-tier morsel of
# a long first call (tests release a held compile there: a switch without a timing race)
hold_compiles = None
between_morsels = None


def differs(lowered, backend: str) -> str | None:
    """Why the numpy tier's bits could differ from `backend`'s kernel for this plan (then
    the first call waits for the kernel), or None when they are the same."""
    if getattr(lowered, "row_plan", None) is not None:
        if "float" in repr(lowered.row_plan):
            return "a plan of long rows over floats adds in the kernel's own order"
        return None
    if getattr(lowered, "staged", False):
        # sorts, gathers, distinct, joins and element-wise passes are exact on every runtime;
        # a pass's or the terminal's reduce follows the rules below; a group_by's or a scan's
        # float adds follow each runtime's own order
        for stage in lowered.stages:
            if stage.adds_floats_in_own_order and "float" in repr(stage):
                return "a group_by or scan over floats adds in the kernel's own order"
            inner = getattr(stage, "lowered", None)
            why = None if inner is None or not hasattr(inner, "pass_") else differs(inner, backend)
            if why is not None:
                return why
        return None
    aggs = getattr(lowered.pass_.terminal, "aggs", ())
    for a in aggs:
        is_float = a.dtype.startswith("float")
        if a.op == "sum" and is_float and not registry.get(backend).caps.tier_sums:
            return f"the {backend} kernel adds a float sum in its own tree order"
        if a.op == "fold" and is_float and not a.in_order:
            return "a float fold combines partials in the kernel's chunk order"
    return None


def splittable(lowered) -> tuple | None:
    """The aggregates' ops of a plan whose partial results over consecutive runs of elements
    join into exactly the whole run's (combine.combine_raw), else None."""
    if getattr(lowered, "staged", False) or getattr(lowered, "row_plan", None) is not None:
        return None
    aggs = getattr(lowered.pass_.terminal, "aggs", None)
    if not aggs:
        return None
    for a in aggs:
        exact = a.op in ("count", "any", "all", "first") or (
            a.op in ("sum", "min", "max") and not a.dtype.startswith("float"))
        if not exact:
            return None
    return tuple(a.op for a in aggs)


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
    global _executor
    with _executor_lock:
        if _executor is None:
            # filelock (the cache's compile lock) hooks fork(): imported here, before our
            # hooks are armed (after_fork.arm), not by the compile thread while a fork waits
            import filelock  # noqa: F401
            _executor = _Worker()
            _close_at_exit(_executor)
        return _executor


class _Worker:
    """One daemon thread that runs Pending compiles one at a time, in submission order."""

    def __init__(self):
        self.queue: collections.deque = collections.deque()
        self.cv = threading.Condition()
        self.current = None
        self.closed = False
        self.thread = threading.Thread(target=self._loop, name="querycompute-compile", daemon=True)
        self.thread.start()

    def submit(self, pending) -> None:
        with self.cv:
            if self.closed:
                pending.drop()
                return
            self.queue.append(pending)
            self.cv.notify()

    def _loop(self) -> None:
        while True:
            with self.cv:
                while not self.queue and not self.closed:
                    self.cv.wait()
                if self.closed:
                    return
                self.current = self.queue.popleft()
            try:
                self.current.run()
            finally:
                with self.cv:
                    self.current = None
                    self.cv.notify_all()

    def close(self, wait_s: float) -> None:
        """Drop the compiles not started; wait at most `wait_s` for the one in flight."""
        if not self.thread.is_alive():      # (a forked child's copy of the parent's)
            return
        with self.cv:
            self.closed = True
            dropped = list(self.queue)
            self.queue.clear()
            self.cv.notify_all()
            if self.current is not None:
                self.cv.wait_for(lambda: self.current is None, timeout=wait_s)
        for pending in dropped:
            pending.drop()


def _close_at_exit(worker: _Worker) -> None:
    """At interpreter exit: never wait for a compile not started, at most EXIT_WAIT_S for
    the one in flight (the thread is a daemon: the interpreter does not join it). threading's
    private exit hook runs before the interpreter waits for threads; atexit is the fallback."""
    register = getattr(threading, "_register_atexit", None)
    if register is None:
        import atexit
        register = atexit.register
    register(lambda: worker.close(EXIT_WAIT_S))


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
        self.future = None              # a threading.Event set when the compile ended (or was dropped)
        self.outcome = None             # (compiled object, exception) once the compile ran
        self.resubmit = False           # in a forked child: start again on the next call
        self._warned = False
        self._start_lock = threading.Lock()

    def start(self) -> None:
        """Submit the compile (once, however many threads call this)."""
        with self._start_lock:
            if self.future is None:
                self.resubmit = False
                worker = _pool()
                after_fork.arm("compile thread")     # before the thread imports anything
                self.future = threading.Event()
                worker.submit(self)

    def run(self) -> None:
        """The compile (on the compile thread)."""
        hold = hold_compiles
        if hold is not None:
            hold.wait()
        try:
            with _running:
                try:
                    if self.imports is not None:
                        self.imports()
                    self.outcome = (self.compile_fn(), None)
                except BaseException as exc:
                    self.outcome = (None, exc)
        finally:
            self.ready = True
            self.future.set()

    def drop(self) -> None:
        """Never started (interpreter exit): stays on the numpy tier, waiters are released."""
        self.ready = True
        if self.future is not None:
            self.future.set()

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
        return self.future.wait(timeout)

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
