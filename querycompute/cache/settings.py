"""The environment switches of the kernel cache, where it lives, and the source-dump helper.

Switches are read when asked for (not at import), so a process that sets them before its
first query is honoured.
"""
from __future__ import annotations

import os
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
