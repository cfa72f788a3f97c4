"""The cpu backend's morsel scheduler (DESIGN.md 5f; Leis et al., "Morsel-driven
parallelism", SIGMOD 2014): one compiled entry point per kernel step, run over ranges of
the input's chunks by a small process-wide pool of threads.

A fused pass's entry points (dialects/numba_py.py) each take a range of chunks [c0, c1)
(CHUNK elements each), run without the GIL and write per-chunk partials (a reduce's
accumulators, a compaction's counts) into arrays the caller owns; the caller combines them in
chunk order afterwards. `run(fn, nch, args)` calls `fn(c0, c1, *args)` over all chunks
[0, nch):

- a small input (nch no more than one morsel) is ONE call on the calling thread: no pool,
  no thread wakes;
- else the chunks are cut into morsels of `step` chunks and handed out dynamically: the
  calling thread runs the first one (so a compile numba needs happens there, once), then it
  and up to `workers` pool threads each take the next morsel off a shared counter until
  none is left. A core slowed by another process takes fewer morsels, where
  a static split (numba's prange) makes every call wait for the slowest core's share.

The result never depends on who ran what: every chunk is computed by one call, whatever the
thread, and partials combine in chunk order. A step that may give up (a group table past its
limit, a check that finds a key out of order) passes `stop`, a test the scheduler makes before
each morsel: once it holds, the morsels left are skipped (their chunks keep the values the
caller initialised, which it then reads as "gave up"), so the step costs about one morsel
instead of a pass. Whether it gives up never depends on timing: the caller's result is "gave
up" as soon as any chunk gives up, and a skipped chunk only happens after one did. Each caller's job is its own (one counter, one
completion event), so any number of Python threads can run kernels at once, and a caller
always works on its own job, so it finishes even when every pool thread is busy elsewhere.

Fork: a child has none of the parent's threads; `after_fork` drops the pool, and the child's
first parallel call starts its own. `configure(workers=, step=)` is the test hook (and a
user's knob): workers = pool threads besides the caller (default: numba's thread count, from
NUMBA_NUM_THREADS or the cores, less one), step = chunks per morsel (default: `auto_step`).
`stats()` counts the morsels pool threads ran.
"""
from __future__ import annotations

import itertools
import os
import queue
import sys
import threading

from querycompute._codegen.sum_order import CHUNK

from ... import after_fork

MAX_STEP = 4                  # chunks per morsel at most (4 x 65536 elements)
MORSELS_PER_THREAD = 4        # at least this many morsels per thread where n allows


class _Job:
    """One parallel call: the entry point, its arguments, the morsel counter and the
    completion event. `work()` takes morsels until none is left (any thread may call it)."""

    __slots__ = ("fn", "args", "nch", "step", "nm", "take", "left", "lock", "done", "error", "stop")

    def __init__(self, fn, args: tuple, nch: int, step: int, stop=None):
        self.fn, self.args, self.nch, self.step, self.stop = fn, args, nch, step, stop
        self.nm = -(-nch // step)
        # next() of itertools.count is one C call: atomic under the GIL, so two threads
        # never take the same morsel
        self.take = itertools.count().__next__
        self.left = self.nm
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.error = None

    def work(self, pooled: bool, most: int = -1) -> None:
        """Run morsels until none is left (or `most` of them)."""
        fn, args, nch, step, nm, stop = self.fn, self.args, self.nch, self.step, self.nm, self.stop
        ran = 0
        while ran != most:
            k = self.take()
            if k >= nm:
                break
            c0 = k * step
            try:
                if stop is None or not stop():      # skipped: the caller's result gave up
                    fn(c0, min(nch, c0 + step), *args)
            except BaseException as exc:            # re-raised by the caller (run)
                if self.error is None:
                    self.error = exc
            ran += 1
        if ran:
            with self.lock:
                self.left -= ran
                if pooled:
                    _stats["pooled"] += ran
                if self.left == 0:
                    self.done.set()


class _Pool:
    """`workers` daemon threads serving jobs from one queue."""

    def __init__(self, workers: int):
        self.jobs = queue.SimpleQueue()
        self.workers = workers
        for k in range(workers):
            threading.Thread(target=self._serve, name=f"querycompute-morsels-{k}", daemon=True).start()

    def _serve(self) -> None:
        get = self.jobs.get
        while True:
            get().work(True)


_settings = {"workers": None, "step": None}
_state = {"pool": None, "pid": None}
_stats = {"pooled": 0}
_start_lock = threading.Lock()


def chunks(n: int) -> int:
    """The chunks of CHUNK rows that n rows make (at least one: a step over an empty input
    runs once and does nothing)."""
    return max(1, -(-n // CHUNK))


def numba_threads() -> int:
    """numba's thread count (NUMBA_NUM_THREADS, else the cores this process may use): what
    the morsel pool sizes itself by (morsels.py). Read from numba's config once numba is
    imported; before (a process whose passes all took the llvm route) by numba's own rule,
    without importing it."""
    numba = sys.modules.get("numba")
    if numba is not None and hasattr(numba, "config"):
        return int(numba.config.NUMBA_NUM_THREADS or 1)
    raw = os.environ.get("NUMBA_NUM_THREADS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:             # no sched_getaffinity (macOS, Windows)
        return max(1, os.cpu_count() or 1)


def default_workers() -> int:
    """Pool threads besides the caller: numba's thread count (NUMBA_NUM_THREADS, else the
    cores this process may use) less one."""
    return max(0, numba_threads() - 1)


def pool_threads() -> int:
    """Pool threads besides the caller (configure, else default_workers: read once)."""
    w = _settings["workers"]
    if w is None:
        w = _settings["workers"] = default_workers()
    return w


def auto_step(nch: int, threads: int) -> int:
    """Chunks per morsel: MORSELS_PER_THREAD morsels per thread or more, at most MAX_STEP
    chunks each (small morsels balance a busy machine; each costs one call, ~2 us)."""
    return max(1, min(MAX_STEP, nch // (threads * MORSELS_PER_THREAD)))


def configure(workers: int | None = None, step: int | None = None) -> None:
    """Set the pool threads besides the caller (0: every call runs inline) and the chunks
    per morsel; None restores the default. A changed thread count starts a new pool on the
    next parallel call (the old one's threads stay idle)."""
    if workers is not None and workers < 0 or step is not None and step < 1:
        raise ValueError(f"morsels.configure: workers must be >= 0 and step >= 1; got "
                         f"workers={workers}, step={step}")
    _settings["workers"], _settings["step"] = workers, step
    with _start_lock:
        if _state["pool"] is not None and _state["pool"].workers != pool_threads():
            _state["pool"] = None


def _pool(count: int) -> _Pool:
    pool = _state["pool"]
    if pool is not None and _state["pid"] == os.getpid():
        return pool
    with _start_lock:
        if _state["pool"] is None or _state["pid"] != os.getpid():
            _state["pool"], _state["pid"] = _Pool(count), os.getpid()
        return _state["pool"]


def morsels(nch: int) -> int:
    """How many morsels `run` cuts nch chunks into now (1: one call on the caller's thread)."""
    count = pool_threads()
    step = _settings["step"] or auto_step(nch, count + 1)
    return 1 if count == 0 or nch <= step else -(-nch // step)


def run(fn, nch: int, args: tuple, stop=None) -> int:
    """fn(c0, c1, *args) over the chunks [0, nch), in morsels (module doc); returns how many
    morsels ran (1: one call on this thread). `stop()`, when given, is asked before each
    morsel; once true, the morsels left are skipped (module doc)."""
    count = pool_threads()
    step = _settings["step"] or auto_step(nch, count + 1)
    if count == 0 or nch <= step:
        fn(0, nch, *args)
        return 1
    job = _Job(fn, args, nch, step, stop)
    # the first morsel on this thread before any other starts: an entry point numba must
    # compile for these argument types (a first strided input) compiles here, where the
    # caller's trace books it as compile time (numba_loader.jit_ms_since), and once
    job.work(False, 1)
    pool = _pool(count)
    put = pool.jobs.put
    for _ in range(min(pool.workers, job.nm - 1)):
        put(job)
    job.work(False)
    job.done.wait()
    if job.error is not None:
        raise job.error
    return job.nm


def stats() -> dict:
    """{"pooled": morsels run by pool threads} since the process started (or forked)."""
    return dict(_stats)


def _after_fork() -> None:
    global _start_lock
    _state["pool"], _state["pid"] = None, None
    _stats["pooled"] = 0
    _start_lock = threading.Lock()


after_fork.register(_after_fork)
