"""Taking a compile lock another process holds: say who holds it, and stop waiting for a
holder that makes no progress (store.DiskCache.compile_lock).

The holder writes its pid beside the lock (`<key>.holder`). A waiter logs once, at INFO on
the `querycompute` logger, which process it waits for; while it waits it watches that
process's CPU time (Linux: /proc/<pid>/stat). A holder that has used no CPU for
QUERYCOMPUTE_CACHE_LOCK_STALL seconds (stopped with SIGSTOP, hung, swapped out) is given up
on: a WARNING, and the waiter compiles on its own. A compile always uses CPU, so a live
holder is never given up on, however long it takes; where CPU time can't be read, only the
overall limit applies. Giving up is safe: every file is published whole with os.replace, so
two processes compiling one key both end with correct kernels and one valid entry.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from .. import config
from ..log import logger
from .entry_format import write_atomic

STALL_VAR = "QUERYCOMPUTE_CACHE_LOCK_STALL"
_POLL_S = 0.25


class LockAbandoned(Exception):
    """The compile lock was not taken: its holder made no progress, or the wait hit its limit."""


def holder_path(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name + ".holder")


def _holder_pid(lock_path: Path) -> int | None:
    try:
        text = holder_path(lock_path).read_text(encoding="ascii", errors="replace")
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _cpu_and_state(pid: int | None) -> tuple[int, str] | None:
    """(user + system clock ticks, state letter) of process `pid` from /proc; None where that
    can't be read (no /proc, the process is gone, pid unknown)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[11]) + int(fields[12]), fields[0].decode("ascii", "replace")
    except (OSError, IndexError, ValueError):
        return None


def acquire(lock, lock_path: Path, label: str, timeout_s: float):
    """Take `lock` (a filelock.FileLock on `lock_path`) and record this process as its holder.
    Raises LockAbandoned (saying why) when the holder stalls or `timeout_s` passes."""
    from filelock import Timeout
    start = time.monotonic()
    stall_s = config.get(STALL_VAR)
    pid = progress = None
    progressed_at = start
    first = True
    while True:
        try:
            lock.acquire(timeout=0 if first else _POLL_S)
            break
        except Timeout:
            pass
        now = time.monotonic()
        holder = _holder_pid(lock_path)
        sample = _cpu_and_state(holder)
        if first or holder != pid:                        # first look, or a new holder
            first = False
            pid, progress, progressed_at = holder, sample, now
            logger.info("querycompute: waiting for process %s, which holds the compile lock "
                        "of %s (%s)", pid if pid is not None else "(unknown)", label, lock_path)
            continue
        if sample is None or progress is None or sample[0] != progress[0]:
            progress, progressed_at = sample, now         # used CPU (or can't tell): alive
        stalled = now - progressed_at
        if progress is not None and stalled >= stall_s:
            state = " (stopped)" if progress[1] in ("T", "t") else ""
            why = (f"process {pid}{state} has held the compile lock of {label} for "
                   f"{now - start:.0f} s without using any CPU for {stalled:.0f} s "
                   f"({STALL_VAR}={stall_s})")
            logger.warning("querycompute: %s; compiling without the lock", why)
            raise LockAbandoned(why)
        if now - start >= timeout_s:
            why = f"process {pid} has held the compile lock of {label} for {timeout_s:.0f} s"
            logger.warning("querycompute: %s; compiling without the lock", why)
            raise LockAbandoned(why)
    try:
        write_atomic(holder_path(lock_path), f"{os.getpid()}\n".encode("ascii"))
    except OSError:
        pass                                  # waiters then only know that someone holds it
    return lock
