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

Beside them, IMPORT_LOCK and `import_for_compile`: the one lock every import a compile needs
is made under (the backends' registry and the disk cache's compile lock use it).
"""
from __future__ import annotations

import importlib
import sys
import threading
from contextlib import contextmanager
from typing import Hashable, Iterator

from . import after_fork


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


# Imports and compiles: a module two threads import at once, each importing the other on the
# way, comes out half initialised in one of them ("partially initialized module",
# _DeadlockError, "cannot import name"); a fork while another thread imports leaves it half
# initialised in the child for good. So every module a compile needs is imported once, by
# `backends/registry.load_compiler`, under IMPORT_LOCK, before any compile of that backend
# runs (by the thread that compiles: a background compile's first step, under tiers' compile
# lock); compiles then import nothing of ours or of the compiler's. IMPORT_LOCK is held across fork()
# (after_fork.hold).
IMPORT_LOCK = threading.RLock()
after_fork.hold(IMPORT_LOCK, rank=2)


def import_for_compile(mod: str):
    """Module `mod`, which only a compile needs once it misses the disk cache (filelock: the
    cache's compile lock, ~20 ms of imports with decimal and secrets, which a cpu disk hit
    never takes), imported on first use as registry.load_compiler imports a compiler's
    modules: under IMPORT_LOCK (no other thread of ours imports at once; a fork waits), then its fork hooks
    armed after ours (after_fork.arm). Afterwards a dict lookup."""
    module = sys.modules.get(mod)
    if module is not None and mod in _imported_for_compile:
        return module
    with IMPORT_LOCK:
        module = importlib.import_module(mod)
        after_fork.arm(mod)
        _imported_for_compile.add(mod)
    return module


_imported_for_compile: set[str] = set()
