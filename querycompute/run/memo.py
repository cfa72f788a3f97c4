"""The in-memory memo of compiled queries: a bounded, thread-safe map from a query's signature
to what answers it, so a notebook that defines 10,000 distinct lambdas keeps memory flat.

Eviction is "second chance" (CLOCK), an approximation of least-recently-used that costs a
reader nothing but one attribute store: a hit marks the entry used; when the memo is full,
the oldest entries are examined in insertion order, a used one has its mark cleared and goes
to the back, the first unused one is dropped. Readers take no lock (a dict lookup is atomic
under the GIL); writers (a compile finished) take one.

Size: QUERYCOMPUTE_MEMO_SIZE (default 2048 entries), or `qc.set_memo_size(n)` at run time.
An entry holds a compiled pass and its launch state; the kernels themselves may stay alive
in a backend's own tables (numba dispatchers, OpenCL programs) while a Query holds them.
"""
from __future__ import annotations

import threading
from typing import Any, Hashable

DEFAULT_SIZE = 2048


def _size_from_env() -> int:
    """QUERYCOMPUTE_MEMO_SIZE (config.py: a refused value is warned about, then the default)."""
    from .. import config
    return config.get("QUERYCOMPUTE_MEMO_SIZE")


class Memo:
    """key -> value, at most `size` entries. Values must accept a `used` attribute store
    (the engine's entries are slotted classes with a `used` slot)."""

    def __init__(self, size: int | None = None):
        self._entries: dict[Hashable, Any] = {}
        self._lock = threading.Lock()
        self.size = size or _size_from_env()

    def get(self, key: Hashable):
        entry = self._entries.get(key)
        if entry is not None:
            entry.used = True
        return entry

    def put(self, key: Hashable, value: Any, replace: bool = False) -> Any:
        """Store `value` under `key` and return what the memo holds for it then: with
        `replace`, `value`; else the entry another thread stored first, if any (so every
        caller ends up sharing one entry)."""
        with self._lock:
            old = self._entries.get(key)
            if old is not None and not replace:
                return old
            value.used = False
            self._entries[key] = value
            self._evict()
        return value

    def resize(self, size: int) -> None:
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"memo size must be a positive integer, got {size!r}")
        with self._lock:
            self.size = size
            self._evict()

    def after_fork(self) -> None:
        """In a forked child: a lock another parent thread held stays held; start afresh."""
        self._lock = threading.Lock()

    def items(self) -> list:
        """A snapshot of (key, value) pairs."""
        with self._lock:
            return list(self._entries.items())

    def discard(self, key: Hashable) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def _evict(self) -> None:
        entries = self._entries
        while len(entries) > self.size:
            key = next(iter(entries))
            entry = entries.pop(key)
            if entry.used:                 # second chance: to the back, unmarked
                entry.used = False
                entries[key] = entry
            # else: dropped

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries
