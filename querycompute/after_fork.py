"""What a child process made by fork() must not use from its parent.

fork() copies the parent's memory but only the calling thread. Whatever ran threads of its
own in the parent is broken in the child: pocl's and CUDA's driver threads (a call into an
OpenCL context made before the fork hangs in the child), GNU OpenMP's pool behind numba's
parallel loops (the child aborts), a background compile in flight. Each module that owns such
state registers a callback here; the callbacks run in the child right after the fork, before
it runs anything else, and each disarms its own state (docs/guide.md, "Threads and processes").

A lock another thread holds at the fork stays held in the child for good, and a module that
thread was importing stays half initialised there. So the locks around compiles and imports
are held across the fork (`hold`): the forking thread takes them first, in rank order, which
waits for a compile or an import in flight to end, and releases them again in both processes.
That wait is armed (`arm`) once a compiler and everything a compile imports are imported:
Python runs the `before` hooks newest first, so ours runs before those of the libraries a
compile uses (logging's takes its lock: a compile that logs while we wait would deadlock).
"""
from __future__ import annotations

import os
from typing import Callable

_callbacks: list[Callable[[], None]] = []
_held: list[tuple[int, object]] = []          # (rank, lock), taken in rank order at a fork


def register(callback: Callable[[], None]) -> None:
    """Run `callback()` in every child process forked from now on."""
    _callbacks.append(callback)


def hold(lock, rank: int) -> None:
    """Take `lock` (acquire()/release()) in the forking thread before every fork from now on
    and release it after, in the parent and in the child. Locks are taken by rising `rank`,
    so a lock whose holder may need another is given the lower rank."""
    _held.append((rank, lock))
    _held.sort(key=lambda item: item[0])


def _before() -> None:
    for _, lock in _held:
        lock.acquire()


def _release() -> None:
    for _, lock in reversed(_held):
        lock.release()


def _in_child() -> None:
    for callback in _callbacks:
        callback()


_armed = []


def arm() -> None:
    """Hold the `hold` locks across every fork from now on (once per process; see the
    module docstring for when)."""
    if not _armed and hasattr(os, "register_at_fork"):
        _armed.append(True)
        os.register_at_fork(before=_before, after_in_parent=_release, after_in_child=_release)


if hasattr(os, "register_at_fork"):          # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_in_child)
