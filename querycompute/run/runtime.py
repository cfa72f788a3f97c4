"""The one owner of the state a process's queries share (DESIGN.md section 2, "State has an
owner"): the memo of compiled queries (warm entries and plans, bounded: memo.py), the
per-signature compile locks, the StageRuntime of each backend, and through them every
compiled-artifact cache (artifacts.py: the cpu backend's numba modules, a GPU backend's
kernel sets, the stage runtimes' launch loops and generic kernels; each bounded, each listed
by `artifacts()` and emptied by `clear()`). The engine and the executor reach them through
`RUNTIME`; after fork() it starts the locks afresh and drops what the child can't use
(engine._after_fork).

Left with their modules: the frontend's capture tables, keyed by code objects (one entry
per lambda written in the source, not per call), and the backends' device handles.
"""
from __future__ import annotations

import importlib
import threading

from .. import artifacts
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

    def artifacts(self) -> dict:
        """{cache name: (entries, bound)} for the memo and every artifact cache alive."""
        out = {"memo: compiled queries": (len(self.memo), self.memo.size)}
        for c in artifacts.caches():
            n, limit = out.get(c.name, (0, 0))
            out[c.name] = (n + len(c), limit + c.limit)      # (one per backend instance)
        return out

    def clear(self) -> None:
        """Forget every compiled query and artifact of this process (the disk cache stays):
        the next call of each query plans and loads again."""
        self.memo.clear()
        for c in artifacts.caches():
            c.clear()

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
