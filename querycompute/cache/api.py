"""The public face of the kernel cache (`qc.cache`): inspection and maintenance of the
process-wide store, plus the memory-hit counter the query layer calls."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from typing import TYPE_CHECKING

from .. import after_fork
from .keys import BACKENDS
from .store import DiskCache

if TYPE_CHECKING:              # inventory loads when the cache is first listed or cleared
    from .inventory import CacheEntry, Removal

# The one store every backend in this process uses; configured from the environment
# (QUERYCOMPUTE_CACHE_DIR, QUERYCOMPUTE_CACHE) on first use.
disk_cache = DiskCache()
after_fork.register(disk_cache.after_fork)


@dataclass(frozen=True)
class CacheStats:
    """This process's cache activity plus what is on disk now."""
    path: str
    disk_enabled: bool            # False with QUERYCOMPUTE_CACHE=0
    disk_writable: bool           # False after a write failed (read-only or full directory)
    memory_hits: int              # this process: kernels served by the query layer's dict
    disk_hits: int                # this process: kernels loaded from disk instead of compiled
    misses: int                   # this process: disk lookups that found nothing usable
    compiles: int                 # this process
    compile_ms: float             # this process, total
    damaged: int                  # this process: entries found damaged (each one a miss)
    entries: int                  # on disk now
    bytes: int                    # on disk now
    incomplete: int               # on disk now: entries without readable metadata
    disk_hits_all_time: int       # sum of every entry's hit count (all processes)
    entries_by_backend: dict

    def as_dict(self) -> dict:
        return asdict(self)


class CacheAPI:
    """`qc.cache`: inspection and maintenance of a DiskCache (the process-wide one for the
    `cache` object below; tests may wrap their own)."""

    def __init__(self, store: DiskCache):
        self.disk = store

    @property
    def path(self) -> Path:
        """The cache root directory ($QUERYCOMPUTE_CACHE_DIR or the platform default)."""
        return self.disk.path

    def entries(self, backend: str | None = None) -> list[CacheEntry]:
        """Every readable disk entry (of `backend` if given), most recently used first."""
        from . import inventory
        _check_backend(backend)
        found, _broken = inventory.scan(self.disk.entries_root)
        found = [e for e in found if backend is None or e.backend == backend]
        return sorted(found, key=lambda e: (e.last_used, e.key), reverse=True)

    def find(self, key_prefix: str) -> CacheEntry:
        """The one entry whose key starts with `key_prefix` (as `cache show` takes it);
        KeyError saying what to do when none or several match."""
        prefix = key_prefix.strip().lower()
        if not prefix:
            raise KeyError("give at least one hex digit of a cache key "
                           "(see `querycompute cache list`)")
        matches = [e for e in self.entries() if e.key.startswith(prefix)]
        if not matches:
            raise KeyError(f"no cache entry has a key starting with {key_prefix!r} in "
                           f"{self.disk.path} (see `querycompute cache list`)")
        if len(matches) > 1:
            keys = ", ".join(e.key[:16] for e in matches[:5])
            raise KeyError(f"{len(matches)} cache entries start with {key_prefix!r} "
                           f"({keys}...): give more digits")
        return matches[0]

    def stats(self) -> CacheStats:
        """This process's hits, misses and compiles, and the entries and bytes on disk."""
        from . import inventory
        found, broken = inventory.scan(self.disk.entries_root)
        by_backend: dict[str, int] = {}
        for e in found:
            by_backend[e.backend] = by_backend.get(e.backend, 0) + 1
        c = self.disk.counters
        return CacheStats(
            path=str(self.disk.path), disk_enabled=self.disk.enabled,
            disk_writable=self.disk.writable, memory_hits=c.memory_hits,
            disk_hits=c.disk_hits, misses=c.misses, compiles=c.compiles,
            compile_ms=round(c.compile_ms, 3), damaged=c.damaged, entries=len(found),
            bytes=sum(e.size_bytes for e in found) + sum(map(inventory.directory_size, broken)),
            incomplete=len(broken), disk_hits_all_time=sum(e.hit_count for e in found),
            entries_by_backend=dict(sorted(by_backend.items())))

    def clear(self, backend: str | None = None) -> Removal:
        """Remove every disk entry, or only `backend`'s. The memory level belongs to the
        query layer; kernels already loaded in this process stay usable."""
        from . import inventory
        _check_backend(backend)
        return inventory.clear(self.disk.entries_root, backend)

    def prune(self, max_bytes: int) -> Removal:
        """Remove least recently used entries until the disk cache holds at most
        `max_bytes` bytes (an int; see sizes.parse_size for '500MB')."""
        from . import inventory
        return inventory.prune(self.disk.entries_root, max_bytes)

    def note_memory_hit(self) -> None:
        """The query layer calls this each time its in-memory dict serves a ready kernel."""
        self.disk.note_memory_hit()

    def __repr__(self) -> str:
        return f"<querycompute kernel cache at {self.disk.path}>"


def _check_backend(backend) -> None:
    """A misspelt backend name would match no entry and clear nothing, silently."""
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; the cache holds kernels of "
                         f"{', '.join(BACKENDS)} (or pass None for all of them)")


# `qc.cache`.
cache = CacheAPI(disk_cache)
