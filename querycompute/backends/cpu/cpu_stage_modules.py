"""The cpu stage runtime's numba modules, loaded through the cpu backend's disk cache.

A `StageModule` is one module source (the fixed kernels of cpu_stage_kernels.py, or a scan
module printed by dialects/numba_scan.py): stored in the kernel cache under the cpu
backend's key (cpu_module.cache_key: the source, numba's identity and options), imported
from there so numba's cache=True files sit beside it, and sealed after numba compiles
anything new. `call` runs one entry point and says where its code came from ("memory",
"disk": numba's cache, or "compiled"), for the trace rows.
"""
from __future__ import annotations

import time
from pathlib import Path

from querycompute._codegen import order_keys

from ...cache import disk_cache, dump_source
from ...errors import CompileError
from ...locks import KeyedLocks
from . import cpu_jit_time as jit_time
from .cpu_module import cache_key, numba_options

_HERE = Path(__file__).parent
_modules: dict[str, "StageModule"] = {}       # source -> its loaded module
_loading = KeyedLocks()


class StageModule:
    def __init__(self, name: str, source: str, ns: dict, key, origin: str, compile_ms: float):
        self.name, self.source, self.ns, self.key = name, source, ns, key
        self.origin, self.compile_ms = origin, compile_ms      # of the first call's report
        self._dispatchers = [v for v in ns.values() if hasattr(v, "overloads") and hasattr(v, "stats")]
        self._known = self._specialisations()
        self._misses = self._cache_misses()

    def _specialisations(self) -> int:
        return sum(len(d.overloads) for d in self._dispatchers)

    def _cache_misses(self) -> int:
        return sum(sum(d.stats.cache_misses.values()) for d in self._dispatchers)

    def call(self, fn: str, *args):
        """(result of entry point `fn`, cache origin, compile ms, run ms). A call that made
        numba compile or load code reports it (numba's compiler time inside the call counts
        as compile time, the rest as run time) and seals the new files into the cache entry."""
        t0 = time.perf_counter()
        try:
            result = self.ns[fn](*args)
        except Exception as exc:
            if type(exc).__module__.startswith("numba"):      # typing/lowering: show source
                raise CompileError("numba", f"{type(exc).__name__}: {exc}", self.source,
                                   numba_options()) from exc
            raise
        ms = (time.perf_counter() - t0) * 1e3
        origin, compile_ms = "memory", 0.0
        if self.origin != "memory":                 # the module's own load, reported once
            origin, compile_ms, self.origin = self.origin, self.compile_ms, "memory"
        known = self._specialisations()
        if known != self._known:
            self._known = known
            misses = self._cache_misses()
            compiled = misses > self._misses
            self._misses = misses
            jit_ms = min(jit_time.since(t0), ms)    # numba's compiler inside the call
            if compiled:
                disk_cache.seal_module(self.key, compile_ms=jit_ms, new_compile=True)
            origin = "compiled" if compiled or origin == "compiled" else "disk"
            compile_ms += jit_ms
            ms -= jit_ms
        return result, origin, compile_ms, ms


def kernels_source(*more: str) -> str:
    """The fixed stage kernels' module text: order_keys' numba spelling of the order bits
    (order_keys.NUMBA_SOURCE), cpu_stage_kernels.py, then the kernel files named in `more`
    (cpu_group_kernels.py, cpu_join_kernels.py), each under a header line."""
    parts = [order_keys.NUMBA_SOURCE, (_HERE / "cpu_stage_kernels.py").read_text()]
    for name in more:
        parts.append(f"# ---- {name} " + "-" * (88 - len(name)) + "\n" + (_HERE / name).read_text())
    return "\n\n".join(parts)


def load(name: str, source: str) -> StageModule:
    """The module for `source` (memory, disk cache, or stored and imported now)."""
    hit = _modules.get(source)
    if hit is not None:
        return hit
    with _loading.hold(source):
        hit = _modules.get(source)
        if hit is None:
            hit = _modules[source] = _load_new(name, source)
        return hit


def _load_new(name: str, source: str) -> StageModule:
    """As cpu._load_new: a disk hit, or (under the compile lock, so one process of several
    stores it) a new entry; numba compiles each entry point on its first call."""
    jit_time.listen()
    key = cache_key(source)
    t0 = time.perf_counter()
    module = disk_cache.import_entry(key)         # None also when a prune removed it since
    origin = "disk"
    if module is None:
        before = disk_cache.stamp(key)
        with disk_cache.compile_lock(key):
            published = disk_cache.stamp(key) not in (None, before)
            module = disk_cache.import_entry(key) if published else None
            if module is None:
                dump_source(name, "numba", source)
                path = disk_cache.store_module(key, source_suffix=".py", kernel_names=[name])
                module = disk_cache.import_module(path, key)
                origin = "compiled"
    ns = module.__dict__
    return StageModule(name, source, ns, key, origin, (time.perf_counter() - t0) * 1e3)
