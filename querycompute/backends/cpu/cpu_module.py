"""The cpu backend's module as it is compiled and cached: the numba dialect's source made
importable on its own, with numba's own cache switched on, and its disk-cache key.

codegen.dialects.numba_py prints a module meant to run in numba_py_runtime.namespace(); here
it is printed with `cache=True` on every function, so numba writes its compiled code into
__pycache__/ beside the file, where the disk cache seals it, and gets a two-line prelude that
pulls that namespace in (so the file, imported from its cache entry, runs as it is).
"""
from __future__ import annotations

from functools import lru_cache

from querycompute._codegen.dialects import numba_py
from querycompute._codegen.program import Pass

from ...cache import disk_cache, numba_identity

PRELUDE = ("from querycompute._codegen.dialects.numba_py_runtime import namespace as _qc_namespace\n"
           "globals().update(_qc_namespace())\n")


def module_source(p: Pass) -> str:
    """The exact text the cpu backend writes, imports and numba compiles for pass p (a
    pass fused after a scan brings the scan's functions: dialects/numba_scan_fused.py)."""
    if getattr(p, "scan", None) is not None:
        from querycompute._codegen.dialects import numba_scan_fused
        return numba_scan_fused.render(p, cache=True)
    return PRELUDE + numba_py.render(p, cache=True)


@lru_cache(maxsize=1)
def numba_options() -> tuple[str, ...]:
    """The decorator flags every generated function carries, plus numba's settings that
    change the machine code it makes (numba keys its own files on the CPU name and features,
    not on the optimisation level or bounds checking)."""
    from numba.core import config
    return ('error_model="numpy"', "fastmath=False", f"NUMBA_OPT={config.OPT}",
            f"NUMBA_BOUNDSCHECK={config.BOUNDSCHECK}",
            f"NUMBA_CPU_NAME={config.CPU_NAME or ''}",
            f"NUMBA_CPU_FEATURES={config.CPU_FEATURES or ''}")


@lru_cache(maxsize=1)
def _identity() -> tuple[str, str]:
    return numba_identity()


def cache_key(source: str):
    """The disk-cache key of a module source from `module_source`."""
    compiler, device = _identity()
    return disk_cache.make_key(backend="cpu", compiler=compiler, device=device,
                               options=numba_options(), source=source)
