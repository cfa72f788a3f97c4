"""The cpu backend's module as it is compiled and cached: the numba dialect's source made
importable on its own, with numba's own cache switched on, and its disk-cache key.

codegen.dialects.numba_py prints a module meant to run in numba_py_runtime.namespace() with
`cache=False` on every function. Here it gets a two-line prelude that pulls that namespace in
(so the file, imported from its cache entry, runs as it is) and `cache=True`, so numba writes
its compiled code into __pycache__/ beside the file, where the disk cache seals it.
"""
from __future__ import annotations

from functools import lru_cache

from codegen.dialects import numba_py
from codegen.program import Pass

from ..cache import disk_cache, numba_identity

PRELUDE = ("from codegen.dialects.numba_py_runtime import namespace as _qc_namespace\n"
           "globals().update(_qc_namespace())\n")
_JIT_OFF, _JIT_ON = "cache=False)", "cache=True)"


def module_source(p: Pass) -> str:
    """The exact text the cpu backend writes, imports and numba compiles for pass p."""
    src = numba_py.render(p)
    decorators = src.count("@njit(")
    if src.count(_JIT_OFF) != decorators:
        # A dialect change this module does not know: better a loud error than functions
        # numba silently never caches (every process would compile again).
        raise RuntimeError(f"numba dialect printed {decorators} @njit decorators but "
                           f"{src.count(_JIT_OFF)} with {_JIT_OFF!r}; update "
                           f"querycompute/backends/cpu_module.py to switch numba's cache on")
    return PRELUDE + src.replace(_JIT_OFF, _JIT_ON)


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
