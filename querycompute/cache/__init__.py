"""The compiled-kernel cache (DESIGN.md section 6, issue 6).

Two levels: the query layer keeps signature -> ready kernel in memory (and calls
`note_memory_hit()`); this package is the disk level under `path`, shared by every process
and every backend. Exposed as `qc.cache`:

    qc.cache.entries(backend=None)   -> [CacheEntry], most recently used first
    qc.cache.stats()                 -> CacheStats (hits, misses, compiles, bytes, entries)
    qc.cache.clear(backend=None)     -> Removal
    qc.cache.prune(max_bytes)        -> Removal (least recently used first)
    qc.cache.path                    -> Path of the cache root

Backends use `disk_cache` (see DiskCache for the protocol) and `dump_source`.
"""
from __future__ import annotations

from .api import CacheAPI, CacheStats, cache, disk_cache
from .keys import nvrtc_identity, numba_identity, opencl_identity
from .keys import FORMAT_VERSION, CacheKey, make_key
from .settings import dump_source
from ..sizes import format_size, parse_size
from .store import CacheWarning, DiskCache

__all__ = [
    "CacheAPI", "CacheEntry", "CacheKey", "CacheStats", "CacheWarning", "DiskCache",
    "FORMAT_VERSION",
    "Removal", "cache", "clear", "disk_cache", "dump_source", "entries", "find", "format_size",
    "make_key", "note_memory_hit", "numba_identity", "nvrtc_identity", "opencl_identity",
    "parse_size", "path", "prune", "stats",
]

# The package itself answers like `cache`, so `querycompute.cache` works as `qc.cache`
# whether it is reached as this module or as api.cache.
entries = cache.entries
find = cache.find
stats = cache.stats
clear = cache.clear
prune = cache.prune
note_memory_hit = cache.note_memory_hit


def __getattr__(name: str):
    # `path` follows the environment of the first use (module attributes can't be
    # properties); CacheEntry and Removal load with the inventory, on first use (PEP 562).
    if name == "path":
        return disk_cache.path
    if name in ("CacheEntry", "Removal"):
        from . import inventory
        return getattr(inventory, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
