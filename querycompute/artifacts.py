"""Caches of compiled artifacts, each bounded and each known to the one owner of process state.

Every table of compiled things below the run layer (the cpu backend's numba modules, a GPU
backend's kernel sets, a stage runtime's launch loops and generic kernels) is an
`ArtifactCache`: a map with a name and a bound, least recently used first out. The caches
register themselves here (weakly: a cache lives as long as its owner object) and the Runtime
(run/runtime.py) lists and clears them all (`RUNTIME.artifacts()`, `RUNTIME.clear()`), so no
compiled artifact lives in an unbounded module global. Dropping an artifact only forgets it:
a compiled query in the memo that still uses it keeps its own reference, and the next query
that needs it loads it again (from the disk cache where the backend has one).

Reads take no lock (a dict lookup and a move to the back are atomic under the GIL); stores
take one. The bounds are sized so a working set never cycles (a query needs a handful of
artifacts; the memo keeps 2048 queries by default).
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, Hashable

from . import after_fork

DEFAULT_LIMIT = 1024

_ALL: "weakref.WeakSet[ArtifactCache]" = weakref.WeakSet()


class ArtifactCache:
    """key -> compiled artifact, at most `limit` entries (least recently used dropped first).
    A cache of data rather than code (encoded string columns) also gives `weigh(value)`, its
    size in bytes, and `max_bytes`: entries are dropped while their sum is above it, so the
    bound is memory, not a count a working set could cycle through (a count of 16 columns
    re-encoded TPC-H's strings on every call when its 22 queries ran in turn)."""

    def __init__(self, name: str, limit: int = DEFAULT_LIMIT, weigh: Callable[[Any], int] | None = None,
                 max_bytes: int = 0):
        self.name = name
        self.limit = limit
        self._weigh, self.max_bytes, self.bytes = weigh, max_bytes, 0
        self._entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        _ALL.add(self)

    def get(self, key: Hashable):
        entry = self._entries.get(key)
        if entry is not None:
            try:
                self._entries.move_to_end(key)
            except KeyError:             # dropped by another thread meanwhile: still a hit
                pass
        return entry

    def put(self, key: Hashable, value: Any) -> Any:
        weigh = self._weigh
        with self._lock:
            old = self._entries.get(key)
            if weigh is not None:
                self.bytes += weigh(value) - (0 if old is None else weigh(old))
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.limit or (weigh is not None and self.bytes > self.max_bytes
                                                      and len(self._entries) > 1):
                _, dropped = self._entries.popitem(last=False)
                if weigh is not None:
                    self.bytes -= weigh(dropped)
        return value

    def get_or_make(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The entry for `key`, made by `make()` on a miss (callers that must make an
        artifact once across threads hold their own per-key lock around this)."""
        hit = self.get(key)
        return hit if hit is not None else self.put(key, make())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def after_fork(self) -> None:
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        more = f", {self.bytes}/{self.max_bytes} bytes" if self._weigh is not None else ""
        return f"ArtifactCache({self.name!r}, {len(self)}/{self.limit}{more})"


def caches() -> list[ArtifactCache]:
    """Every artifact cache alive in this process."""
    return sorted(list(_ALL), key=lambda c: c.name)


def _after_fork() -> None:
    for c in list(_ALL):
        c.after_fork()


after_fork.register(_after_fork)
