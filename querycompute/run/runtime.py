"""The one owner of the state a process's queries share (DESIGN.md section 2, "State has an
owner"): the memo of compiled queries (warm entries and plans, bounded: memo.py), the
per-signature compile locks, and the StageRuntime of each backend. The engine and the
executor reach them through `RUNTIME`; after fork() it starts the locks afresh and drops what
the child can't use (engine._after_fork).

Still outside it (listed in issue 27's closing note): the backends' compiled-artifact caches
(the cpu backend's modules, the GPU programs and kernel sets) and the frontend's capture
cache, each bounded or keyed by a code object in its own module.
"""
from __future__ import annotations

import importlib
import threading

from ..locks import KeyedLocks
from .memo import Memo

# backend -> (module under querycompute.backends, attribute): its StageRuntime instance or
# class. A backend without one runs its column operations with the numpy reference, which
# every trace row then names (dialect "numpy"): visible, never silent.
_STAGE_RUNTIMES = {"numpy": ("stage_runtime", "NumpyStages"), "cpu": ("cpu.cpu_stages", "CpuStages"),
                   "opencl": ("gpu.gpu_stages", "opencl_stages"),
                   "cuda": ("gpu.gpu_stages", "cuda_stages"),
                   "webgpu": ("webgpu.webgpu_stages", "webgpu_stages")}


class Runtime:
    """What every query of this process shares; one instance, `RUNTIME`."""

    def __init__(self):
        self.memo = Memo()              # warm signature -> FastEntry; ("plan", ...) -> Compiled
        self.compiling = KeyedLocks()   # ("plan", ...) -> lock while it compiles
        self._stage_runtimes: dict = {}
        self._lock = threading.Lock()

    def stage_runtime(self, backend: str):
        """The StageRuntime `backend` runs column operations with (one per backend)."""
        rt = self._stage_runtimes.get(backend)
        if rt is None:
            with self._lock:
                rt = self._stage_runtimes.get(backend)
                if rt is None:
                    rt = self._stage_runtimes[backend] = _make_stage_runtime(backend)
        return rt

    def after_fork(self) -> None:
        """In a forked child: fresh locks (a lock another thread held stays held there)."""
        self.memo.after_fork()
        self.compiling.after_fork()
        self._lock = threading.Lock()


def _make_stage_runtime(backend: str):
    module, attr = _STAGE_RUNTIMES.get(backend, _STAGE_RUNTIMES["numpy"])
    try:
        obj = getattr(importlib.import_module(f"querycompute.backends.{module}"), attr)
    except (ImportError, AttributeError):
        obj = importlib.import_module("querycompute.backends.stage_runtime").NumpyStages
    return obj() if callable(obj) else obj      # a class or factory function, or an instance


RUNTIME = Runtime()
