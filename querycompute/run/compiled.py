"""Compiled queries: a plan and its kernels for one backend and one signature.

`Compiled` is what the engine's memo holds (one per signature: the chain's code objects, the
column dtypes, the captured values' types, the terminal and the backend): the fused plan
(`Lowered`), the backend's compiled pass (`Prepared`), how it may stop early (windows.py) and
its tier. With tiered execution (tiers.py) a new signature starts on the numpy tier, the
reference interpreter, while the backend's kernel compiles in the background; `launch` looks
at that compile once per call and moves to the kernel when it is ready.

`CompiledQuery` is the public face, `q.compile(terminal)`: one Query and one terminal bound to
their Compiled entry. Calling it runs the terminal with the arrays' current contents and the
captured values' current values (a new value never recompiles; a new type, or a column whose
dtype changed, finds or compiles another entry). `cq.source()`, `cq.explain()`, `cq.trace`
(this thread's last call of this object), `cq.tier`, `cq.wait()`.
"""
from __future__ import annotations

import threading
from typing import Any

from . import windows
from ..errors import BackendUnavailableError
from ..log import logger


class Compiled:
    """The memo's value: plan + kernels for one backend and signature (see module doc)."""
    __slots__ = ("backend", "lowered", "prepared", "early", "tier", "pending", "origin",
                 "compile_ms", "used", "has_params", "direct", "switch")

    def __init__(self, backend: str, lowered, prepared, pending=None, split: tuple | None = None):
        self.backend = backend          # the backend this entry is for (not always the tier)
        self.lowered = lowered
        self.prepared = prepared        # what launches now: the kernel, or the numpy tier's
        self.early = windows.early_exit(lowered)   # any / all / first stop at a window
        self.pending = pending          # tiers.Pending while the kernel compiles
        self.tier = "kernel" if pending is None else "numpy"
        self.origin = getattr(prepared, "origin", "compiled")
        self.compile_ms = getattr(prepared, "compile_ms", 0.0)
        self.used = False               # memo.Memo's second-chance mark
        self.has_params = bool(lowered.bindings)
        # launch is prepared.run_quick itself: no tier to switch, no windows (the engine's
        # warm paths then call it directly, saving a call level on every warm call)
        self.direct = pending is None and self.early is None
        # a long numpy-tier call moves to the kernel between morsels (windows.TierSwitch)
        self.switch = windows.tier_switch(lowered, split) if pending is not None else None

    def launch(self, cols, params, n: int) -> tuple:
        """(raw results, trace row, the Prepared that ran)."""
        pending = self.pending
        if pending is not None:
            # n >= numpy_max: the numpy tier of this plan would need many times the kernel's
            # memory (tiers.NUMPY_TIER_MAX_HEAVY): wait for the kernel
            if pending.ready or (n >= pending.numpy_max and pending.wait()):
                self.promote()
            elif pending.resubmit:      # a forked child: compile again here
                pending.start()
            if self.pending is not None and self.switch is not None and n > self.switch.morsel:
                return self.switch.launch(self, cols, params, n)
        prepared = self.prepared
        raw, row = windows.launch(prepared, self.early, cols, params, n)
        return raw, row, prepared

    def promote(self) -> None:
        """The background compile finished: launch its kernel from now on (or, when it
        failed, warn once and keep the numpy tier). Idempotent; safe from many threads."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        prepared = pending.result()
        if prepared is None and isinstance(pending.error(), BackendUnavailableError):
            # The backend can't run this at all (e.g. a GPU that NVRTC can't serve): not a
            # compile error to hide behind the numpy tier. Launching raises it, so `auto`
            # falls back to cpu (warned, in the trace) and a pinned backend reports it.
            prepared = Unusable(pending.error())
        if prepared is not None:
            self.origin = getattr(prepared, "origin", "compiled")
            self.compile_ms = getattr(prepared, "compile_ms", 0.0)
            self.prepared = prepared
            self.tier = "kernel"
            logger.info("tier: the %s kernel takes over from the numpy tier", self.backend)
        self.direct = self.early is None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a background compile; True when this entry launches its kernel now, or
        its compile failed and it stays on the numpy tier for good."""
        pending = self.pending
        if pending is not None:
            if not pending.wait(timeout):
                return False
            self.promote()
        return True


class Unusable:
    """Stands in for a compiled pass whose backend can't run it (a background compile that
    raised BackendUnavailableError, a GPU backend in a process forked after it started):
    launching raises that error, which the engine turns into `auto`'s fallback to cpu or,
    for a pinned backend, the user's error."""
    def __init__(self, error: BaseException):
        self.error = error

    def run_quick(self, inputs, params, n):
        raise BackendUnavailableError(str(self.error))


class CompiledQuery:
    """A query's terminal with its plan and kernels made explicit: what `q.compile(...)` returns.

    Calling it runs the terminal with the arrays' and captured values' current contents;
    nothing is looked up again (see the module docstring). With tiered execution the numpy
    tier answers until the kernel is ready (`tier`, `wait()`).

    Example:
        ```python
        total = qc.query(x).select(lambda v: v * scale).compile("sum")
        total()            # x and scale as they are now
        ```
    """

    def __init__(self, query, term, fns: tuple, terminal_arg, tiered: bool | None):
        from . import engine
        self.query = query
        self._term = term
        self._fns = fns
        self._terminal_arg = terminal_arg
        self._tiered = tiered
        self._local = threading.local()
        self._entry = engine.compile_entry(query, term, fns, tiered)
        if self._entry.pending is not None:
            self._entry.pending.start()       # compiling is what compile() asked for

    def __call__(self, **options) -> Any:
        """Run the terminal now; the result is the terminal's (see Query's terminals)."""
        if options:
            raise TypeError(f"CompiledQuery() takes no options on this backend "
                            f"({self.backend}): got {', '.join(sorted(options))}")
        from . import engine
        result = engine.run(self.query, self._term, self._fns, self._tiered, keep_hot=True)
        self._local.last = engine.last_record()
        return result

    @property
    def backend(self) -> str:
        """The backend this compiled query is for (auto resolved when compiled)."""
        return self._entry.backend

    @property
    def tier(self) -> str:
        """"kernel" when the backend's compiled kernel answers, "numpy" while it compiles in
        the background (or when its background compile failed)."""
        entry = self._entry
        if entry.pending is not None and entry.pending.ready:
            entry.promote()
        return entry.tier

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the background compile finished (True), or `timeout` seconds passed."""
        return self._entry.wait(timeout)

    @property
    def trace(self):
        """The Trace of this thread's last call of this object (None before one)."""
        from . import engine
        last = getattr(self._local, "last", None)
        if last is None:
            return None
        trace = engine.build_trace(last)
        self._local.last = trace
        return trace

    def source(self, backend: str | None = None) -> str:
        """The generated kernel source (of `backend`, default this one's)."""
        return self.query.source(backend or self.backend, self._terminal_arg)

    def explain(self, backend: str | None = None) -> str:
        """The operation graph, fused plan and launch shapes (see Query.explain)."""
        return self.query.explain(backend or self.backend, self._terminal_arg)

    def __repr__(self) -> str:
        return f"<CompiledQuery {self._term.name} of {self.query!r} on {self.backend} ({self.tier})>"
