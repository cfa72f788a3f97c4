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
    """key -> compiled artifact, at most `limit` entries (least recently used dropped first)."""

    def __init__(self, name: str, limit: int = DEFAULT_LIMIT):
        self.name = name
        self.limit = limit
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
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.limit:
                self._entries.popitem(last=False)
        return value

    def get_or_make(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The entry for `key`, made by `make()` on a miss (callers that must make an
        artifact once across threads hold their own per-key lock around this)."""
        hit = self.get(key)
        return hit if hit is not None else self.put(key, make())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def after_fork(self) -> None:
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"ArtifactCache({self.name!r}, {len(self)}/{self.limit})"


def caches() -> list[ArtifactCache]:
    """Every artifact cache alive in this process."""
    return sorted(list(_ALL), key=lambda c: c.name)


def _after_fork() -> None:
    for c in list(_ALL):
        c.after_fork()


after_fork.register(_after_fork)
