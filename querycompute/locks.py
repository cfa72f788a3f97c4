"""Per-key locks: a signature is compiled once even when many threads ask for it at the same
moment, while different signatures compile concurrently (as far as the compiler allows:
numba holds its own global compiler lock, pocl and NVRTC do not).

The pattern every user follows is double-checked:

    hit = memo.get(key)
    if hit is None:
        with COMPILE_LOCKS.hold(key):
            hit = memo.get(key)          # another thread may have finished meanwhile
            if hit is None:
                hit = memo[key] = build()

A key's lock exists only while some thread holds or waits for it, so the table stays as small
as the number of compiles in flight (a notebook defining 10,000 lambdas leaves nothing behind).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Hashable, Iterator


class KeyedLocks:
    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Hashable, list] = {}      # key -> [RLock, threads holding/waiting]

    @contextmanager
    def hold(self, key: Hashable) -> Iterator[None]:
        with self._guard:
            entry = self._locks.get(key)
            if entry is None:
                # reentrant: a compile may prepare a fallback pass under the same key
                entry = self._locks[key] = [threading.RLock(), 0]
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._guard:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._locks[key]

    def after_fork(self) -> None:
        """In a forked child only the forking thread exists: locks other threads held or
        waited for would stay held for ever; start with none."""
        self._guard = threading.Lock()
        self._locks = {}

    def __len__(self) -> int:
        """Keys with a holder or waiter now (for tests)."""
        with self._guard:
            return len(self._locks)
