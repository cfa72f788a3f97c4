"""What a child process made by fork() must not use from its parent.

fork() copies the parent's memory but only the calling thread. Whatever ran threads of its
own in the parent is broken in the child: pocl's and CUDA's driver threads (a call into an
OpenCL context made before the fork hangs in the child), the cpu backend's morsel pool (the
child starts its own), a background compile in flight. Each module that owns such
state registers a callback here; the callbacks run in the child right after the fork, before
it runs anything else, and each disarms its own state (docs/guide.md, "Threads and processes").

A lock another thread holds at the fork stays held in the child for good, and a module that
thread was importing stays half initialised there. So the locks around compiles and imports
are held across the fork (`hold`): the forking thread takes them first, in rank order, which
waits for a compile or an import in flight to end, and releases them again in both processes.
Python runs the `before` hooks newest first, and those of logging and filelock take locks a
compile may need, so ours are registered (`arm`) after those libraries are imported. A lock
not free within HOLD_TIMEOUT seconds is left alone: a fork never hangs on it.
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


HOLD_TIMEOUT = 300.0           # seconds a fork waits for one lock before it goes on without


_fork = {"held": None}         # the locks the fork in progress holds


def _before() -> None:
    if _fork["held"] is not None:  # an older registration of ours (arm): taken already
        return
    held = []
    for _, lock in _held:
        if lock.acquire(timeout=HOLD_TIMEOUT):
            held.append(lock)
    _fork["held"] = held


def _release() -> None:
    held, _fork["held"] = _fork["held"], None
    for lock in reversed(held or ()):
        lock.release()


def _in_child() -> None:
    for callback in _callbacks:
        callback()


_armed: set = set()


def arm(when: str) -> None:
    """Hold the `hold` locks across every fork from now on. Called (once per `when`) before
    the first compile thread starts, and again right after a compile's libraries are
    imported: each call registers the hooks anew, so ours run before those of every library
    imported so far (filelock's stops its locks being taken during a fork, and the compile
    we wait for takes one); the older registrations then find the locks taken already."""
    if when not in _armed and hasattr(os, "register_at_fork"):
        _armed.add(when)
        os.register_at_fork(before=_before, after_in_parent=_release, after_in_child=_release)


if hasattr(os, "register_at_fork"):          # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_in_child)
