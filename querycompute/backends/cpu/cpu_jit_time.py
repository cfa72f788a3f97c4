"""numba's compiler time, told apart from run time, and compiles that take long, logged.

numba compiles an entry point (or loads it from its cache) on its first call with new
argument types, inside the call: a trace row timing that call would show the compile as run
time (seconds for a kernel that runs in a millisecond). Two listeners on numba's events,
installed once with the first cpu module (`listen`):

* "numba:compiler_lock" (held while numba compiles or loads from its cache): each thread's
  spans of it, so `since(t0)` says how much of a call that began at perf_counter() t0 was
  numba's compiler; the caller books that as compile time and the rest as run time.
* "numba:compile" (a real compile): the entry point's name goes to log.compiling, which logs
  a compile running longer than about a second, with how long so far, at INFO.
"""
from __future__ import annotations

import threading
import time
from collections import deque

from ... import log

_clock = time.perf_counter
_local = threading.local()        # .depth, .t0, .spans: deque of (start, seconds)
_installed: list = []
_install_lock = threading.Lock()


def _state():
    s = _local.__dict__
    if "spans" not in s:
        _local.depth, _local.t0, _local.spans = 0, 0.0, deque(maxlen=64)
    return _local


def since(t0: float) -> float:
    """Milliseconds this thread spent in numba's compiler since perf_counter() `t0`."""
    spans = getattr(_local, "spans", None)
    if not spans:
        return 0.0
    return sum(seconds for start, seconds in spans if start >= t0) * 1e3


def listen() -> None:
    """Install the listeners (once per process; numba must be importable)."""
    if _installed:
        return
    with _install_lock:
        if _installed:
            return
        from numba.core import event

        class CompilerTime(event.Listener):
            def on_start(self, ev):
                s = _state()
                if s.depth == 0:
                    s.t0 = _clock()
                s.depth += 1

            def on_end(self, ev):
                s = _state()
                s.depth = max(s.depth - 1, 0)
                if s.depth == 0:
                    s.spans.append((s.t0, _clock() - s.t0))

        class CompileProgress(event.Listener):
            def on_start(self, ev):
                log.compiling_begin(_name(ev))

            def on_end(self, ev):
                log.compiling_end()

        event.register("numba:compiler_lock", CompilerTime())
        event.register("numba:compile", CompileProgress())
        _installed.append(True)


def _name(ev) -> str | None:
    """The entry point numba compiles, when it is one of ours (None for the user's own
    numba functions, which log.compiling leaves alone)."""
    fn = getattr((ev.data or {}).get("dispatcher"), "py_func", None)
    module = getattr(fn, "__module__", "") or ""
    if not module.startswith("querycompute"):
        return None
    return f"numba entry point {fn.__name__}"
