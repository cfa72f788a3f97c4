"""The environment switches of the kernel cache, where it lives, whether it may be loaded
from (trust, below), and the source-dump helper.

Switches are read when asked for (not at import), so a process that sets them before its
first query is honoured.
"""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import TextIO

from .. import config
from ..log import emit_source

CACHE_SWITCH = "QUERYCOMPUTE_CACHE"          # "0" keeps compiled kernels in memory only
CACHE_DIR_VAR = "QUERYCOMPUTE_CACHE_DIR"     # overrides the platform's user cache directory
DUMP_SOURCE_VAR = "QUERYCOMPUTE_DUMP_SOURCE"  # "1" prints each kernel's source when compiled
MAX_SIZE_VAR = "QUERYCOMPUTE_CACHE_MAX_SIZE"  # "2GB": prune least recently used after a save


def disk_cache_enabled() -> bool:
    """False when QUERYCOMPUTE_CACHE=0 (or false/no/off): compiled kernels stay in memory.
    A value that is not a switch (QUERYCOMPUTE_CACHE=banana) is warned about (config.py)."""
    return config.get(CACHE_SWITCH)


def max_size() -> int | None:
    """The disk cache's cap in bytes (QUERYCOMPUTE_CACHE_MAX_SIZE, e.g. 500MB); None: no cap."""
    return config.get(MAX_SIZE_VAR)


def dump_source_enabled() -> bool:
    return config.get(DUMP_SOURCE_VAR)


def platform_cache_root() -> Path:
    """The user cache directory of this platform, without a new dependency:
    %LOCALAPPDATA% on Windows, ~/Library/Caches on macOS, $XDG_CACHE_HOME or ~/.cache elsewhere."""
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA")
        return Path(local) if local else Path.home() / "AppData" / "Local"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # The XDG spec says a relative value is invalid and must be ignored.
    return Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"


def cache_directory() -> Path:
    """$QUERYCOMPUTE_CACHE_DIR if set, else <platform cache root>/querycompute."""
    override = config.get(CACHE_DIR_VAR)
    if override:
        return Path(override).expanduser()
    return platform_cache_root() / "querycompute"


def dump_source(kernel: str, dialect: str, source: str, stream: TextIO | None = None) -> None:
    """Backends call this right before compiling `source`; it prints only when
    QUERYCOMPUTE_DUMP_SOURCE=1, so the call costs an environment lookup otherwise. It goes
    through the querycompute.source logger (log.emit_source); `stream`: write there instead."""
    if not dump_source_enabled():
        return
    rule = "=" * 72
    text = f"{rule}\nquerycompute: compiling {dialect} kernel {kernel}\n{rule}\n"
    text += source if source.endswith("\n") else source + "\n"
    if stream is None:
        emit_source(text.rstrip("\n"))       # logger querycompute.source (log.py)
        return
    stream.write(text)
    stream.flush()


# ---- trust: whether the disk cache may be loaded from -----------------------------------
# Whether the disk cache may be loaded from (DESIGN.md section 6, "Trust").
#
# The payload hashes catch damage, not an attacker: whoever can write into the cache can write a
# matching hash, and numba's cache files are pickles. So kernels are loaded only from a place
# nobody else can write:
#
# - the cache directory and every existing directory above it are owned by this user or root;
# - the cache directory is not group- or world-writable, and neither is any directory above it,
#   except one owned by root with the sticky bit (like /tmp: others may add names there but not
#   rename or remove ours);
# - every directory and file of an entry that is read is owned by this user (or root), and its
#   directories are not group- or world-writable.
#
# `untrusted_reason` checks the root once per process (store.DiskCache turns the disk cache off
# for the process, with one warning, when it fails); `entry_problem` checks each path of an entry
# right before it is read (a failing entry is a miss with a warning, and is rewritten).
# Windows (no POSIX owners or modes) is not checked.

_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def _euid() -> int | None:
    return os.geteuid() if hasattr(os, "geteuid") else None


def _owner_problem(path, st: os.stat_result, uid: int) -> str | None:
    if st.st_uid in (uid, 0):
        return None
    return f"{path} is owned by another user (uid {st.st_uid}), not by you (uid {uid}) or root"


def _writable_problem(path, st: os.stat_result) -> str | None:
    if not st.st_mode & _OTHERS_WRITE:
        return None
    who = " and ".join(w for w, bit in (("its group", stat.S_IWGRP), ("others", stat.S_IWOTH))
                       if st.st_mode & bit)
    return f"{path} is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})"


def untrusted_reason(root: str | os.PathLike) -> str | None:
    """Why kernels must not be loaded from the cache at `root` (None: they may). Missing
    directories are skipped: the cache creates them 0700, owned by this user."""
    uid = _euid()
    if uid is None:
        return None
    literal = Path(os.path.abspath(os.fspath(root)))
    real = Path(os.path.realpath(literal))
    # The path as written (a link in it must belong to us or root: its owner picks where it
    # leads) and the directories it leads to.
    for chain, follow in ((literal, False), (real, True)):
        for depth, path in enumerate((chain, *chain.parents)):
            try:
                st = os.stat(path) if follow else os.lstat(path)
            except OSError:
                continue       # missing, or not reachable: then nothing can be read from it
            problem = _owner_problem(path, st, uid)
            if problem is None and follow and stat.S_ISDIR(st.st_mode):
                problem = _writable_problem(path, st)
                if problem and depth > 0 and st.st_uid == 0 and st.st_mode & stat.S_ISVTX:
                    problem = None               # /tmp and the like, above the cache
            if problem:
                return problem
    return None


def entry_problem(path: Path) -> str | None:
    """Why the entry directory or file at `path` must not be read (None: it may): owned by
    another user, or a directory others can write. Does not follow links (entry files are read
    without following them: entry_format.read_entry_file). A missing path is no problem here:
    the caller's read reports it."""
    uid = _euid()
    if uid is None:
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    problem = _owner_problem(path, st, uid)
    if problem is None and stat.S_ISDIR(st.st_mode):
        problem = _writable_problem(path, st)
    return problem


def fix_hint(root: Path) -> str:
    """What to do about an untrusted cache directory, for the warning."""
    return (f"make {root} and the directories above it owned by you (or root) and not writable "
            f"by others (e.g. `chmod 700 {root}`), or set QUERYCOMPUTE_CACHE_DIR to a directory "
            f"only you can write (QUERYCOMPUTE_CACHE=0 turns the disk cache off without this "
            f"warning)")