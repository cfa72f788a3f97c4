"""What a child process made by fork() must not use from its parent.

fork() copies the parent's memory but only the calling thread. Whatever ran threads of its
own in the parent is broken in the child: pocl's and CUDA's driver threads (a call into an
OpenCL context made before the fork hangs in the child), GNU OpenMP's pool behind numba's
parallel loops (the child aborts), a background compile in flight. Each module that owns such
state registers a callback here; the callbacks run in the child right after the fork, before
it runs anything else, and each disarms its own state (docs/guide.md, "Threads and processes").
"""
from __future__ import annotations

import os
from typing import Callable

_callbacks: list[Callable[[], None]] = []


def register(callback: Callable[[], None]) -> None:
    """Run `callback()` in every child process forked from now on."""
    _callbacks.append(callback)


def _in_child() -> None:
    for callback in _callbacks:
        callback()


if hasattr(os, "register_at_fork"):          # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_in_child)
