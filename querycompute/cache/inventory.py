"""What is on disk: the entries with their metadata, their sizes, and removing them
(clear, least-recently-used prune). Works on the directory alone, so the CLI can inspect a
cache without any backend installed."""
from __future__ import annotations

import errno
import os
import re
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..locks import import_for_compile
from .entry_format import (FILE_MAX_BYTES, META_FILE, META_MAX_BYTES, DamagedEntry,
                           decode_meta, read_entry_file)

_KEY_NAME = re.compile(r"[0-9a-f]{64}")
# A rename that fails with these removes nothing anywhere in the cache (read-only, no permission)
_CANNOT_REMOVE = {errno.EACCES, errno.EPERM, errno.EROFS}


@dataclass(frozen=True)
class CacheEntry:
    """One disk-cache entry, as its metadata describes it."""
    key: str
    backend: str
    kind: str                       # "binary" (kernel.bin) or "module" (numba caches beside it)
    kernel_names: tuple[str, ...]
    query: str
    dtypes: tuple[str, ...]
    compiler: str
    device: str
    options: tuple[str, ...]
    created: str                    # ISO-8601 UTC
    last_used: str                  # ISO-8601 UTC
    compile_ms: float
    hit_count: int
    size_bytes: int                 # every file of the entry, numba's __pycache__ included
    sizes: dict = field(default_factory=dict)   # what was stored: {"binary": n, "source": n}
    extra: dict = field(default_factory=dict)
    path: Path = Path()
    source_file: str = ""

    @property
    def source_path(self) -> Path:
        return self.path / self.source_file

    def source(self) -> str:
        """The generated source stored with the entry ("" if it can no longer be read)."""
        try:
            data = read_entry_file(self.source_path, FILE_MAX_BYTES)
            return data.decode("utf-8", errors="replace")
        except (OSError, DamagedEntry):
            return ""

    def as_dict(self) -> dict:
        """JSON-ready and stable: what `querycompute cache list --json` prints per entry."""
        return {
            "key": self.key, "backend": self.backend, "kind": self.kind,
            "kernel_names": list(self.kernel_names), "query": self.query,
            "dtypes": list(self.dtypes), "compiler": self.compiler, "device": self.device,
            "options": list(self.options), "created": self.created,
            "last_used": self.last_used, "compile_ms": self.compile_ms,
            "hit_count": self.hit_count, "size_bytes": self.size_bytes,
            "sizes": dict(self.sizes), "extra": dict(self.extra), "path": str(self.path),
            "source_path": str(self.source_path),
        }


@dataclass(frozen=True)
class Removal:
    """What clear() or prune() removed, and what it could not remove (`failed` entries; `error`
    says why, e.g. a read-only cache directory)."""
    entries: int
    bytes: int
    failed: int = 0
    error: str = ""


def directory_size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass                        # removed while we walked
    return total


def _entry_from_meta(path: Path, meta: dict) -> CacheEntry:
    def strings(name):
        value = meta.get(name, [])
        return tuple(str(v) for v in value) if isinstance(value, list) else ()
    compile_ms = meta.get("compile_ms")
    return CacheEntry(
        key=meta["key"], backend=meta["backend"], kind=meta["kind"],
        kernel_names=strings("kernel_names"), query=str(meta.get("query", "")),
        dtypes=strings("dtypes"), compiler=str(meta.get("compiler", "")),
        device=str(meta.get("device", "")), options=strings("options"),
        created=str(meta.get("created", "")), last_used=str(meta.get("last_used", "")),
        compile_ms=float(compile_ms) if isinstance(compile_ms, (int, float)) else 0.0,
        hit_count=meta["hit_count"], size_bytes=directory_size(path),
        sizes=meta.get("sizes") if isinstance(meta.get("sizes"), dict) else {},
        extra=meta.get("extra") if isinstance(meta.get("extra"), dict) else {},
        path=path, source_file=meta["source_file"])


def scan(entries_root: Path) -> tuple[list[CacheEntry], list[Path]]:
    """(readable entries, directories of entries whose metadata is missing or damaged).
    An entry still being written by another process also shows up as incomplete."""
    entries: list[CacheEntry] = []
    broken: list[Path] = []
    try:
        children = list(os.scandir(entries_root))
    except (FileNotFoundError, NotADirectoryError):
        return entries, broken
    for child in children:
        if not _KEY_NAME.fullmatch(child.name) or not child.is_dir(follow_symlinks=False):
            continue                          # temp and trash names, stray files
        path = Path(child.path)
        try:
            meta = decode_meta(child.name, read_entry_file(path / META_FILE, META_MAX_BYTES))
            entries.append(_entry_from_meta(path, meta))
        except (OSError, DamagedEntry, ValueError, TypeError):
            broken.append(path)
    return entries, broken


def remove_entry(entries_root: Path, path: Path) -> int | None:
    """Remove one entry directory, returning the bytes freed. It is first renamed out of
    its key's name (atomic), so no reader ever sees a half-deleted entry under that key.
    None, and nothing removed, while a process compiles that entry (it holds the entry's
    compile lock, store.DiskCache.compile_lock): its module or binary is being written,
    imported and sealed there, and taking it away would fail that compile."""
    with _unless_compiling(entries_root, path.name) as free:
        if not free:
            return None
        size = directory_size(path)
        trash = entries_root / f".trash-{os.urandom(16).hex()}"
        try:
            os.rename(path, trash)
        except FileNotFoundError:
            return 0                              # another process removed it first
        except OSError as exc:
            if exc.errno in _CANNOT_REMOVE:
                raise                             # read-only: nothing removed (the caller says so)
            trash = path                          # e.g. Windows with a file open: delete in place
        shutil.rmtree(trash, ignore_errors=True)
        if os.path.lexists(trash):
            raise OSError(errno.EACCES, "could not delete every file of the entry", str(path))
        return size


@contextmanager
def _unless_compiling(entries_root: Path, digest: str):
    """Yields False while another process (or thread) holds `digest`'s compile lock; else
    True, holding the lock meanwhile so that no compile of that key starts."""
    locks = entries_root.parent / "locks"         # DiskCache.compile_lock's directory
    if not locks.is_dir():
        yield True                                # nobody ever compiled here with a lock
        return
    filelock = import_for_compile("filelock")     # (the compile lock's module: locks.py)
    FileLock, Timeout = filelock.FileLock, filelock.Timeout
    lock = FileLock(str(locks / f"{digest}.lock"), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        yield False
        return
    except OSError:                               # read-only cache: nobody compiles into it
        yield True
        return
    try:
        yield True
    finally:
        lock.release()


def sweep_leftovers(entries_root: Path, older_than_s: float = 3600.0) -> None:
    """Remove what killed processes left behind: trash directories of interrupted removals
    and temporary files of interrupted writes. Only old ones, so a write in progress in
    another process keeps its temporary file."""
    cutoff = time.time() - older_than_s
    try:
        children = list(os.scandir(entries_root))
    except OSError:
        return
    for child in children:
        if child.name.startswith(".trash-"):
            shutil.rmtree(child.path, ignore_errors=True)
        elif _KEY_NAME.fullmatch(child.name) and child.is_dir(follow_symlinks=False):
            for dirpath, _dirs, files in os.walk(child.path):
                for name in files:
                    path = os.path.join(dirpath, name)
                    try:
                        if name.endswith(".tmp") and os.lstat(path).st_mtime < cutoff:
                            os.unlink(path)
                    except OSError:
                        pass


def clear(entries_root: Path, backend: str | None = None) -> Removal:
    """Remove every entry (backend None, damaged ones included) or every entry of `backend`."""
    sweep_leftovers(entries_root)
    entries, broken = scan(entries_root)
    doomed = [e.path for e in entries if backend is None or e.backend == backend]
    if backend is None:
        doomed += broken
    tally = _Tally()
    for path in doomed:
        tally.remove(entries_root, path)
    return tally.removal()


class _Tally:
    """What clear/prune removed, and what they could not (with the first reason)."""

    def __init__(self) -> None:
        self.entries = self.bytes = self.failed = 0
        self.error = ""

    def remove(self, entries_root: Path, path: Path) -> bool:
        """remove_entry, counted; True when the entry is gone."""
        try:
            size = remove_entry(entries_root, path)
        except OSError as exc:
            self.failed += 1
            self.error = self.error or f"{exc.strerror or exc} ({exc.filename or path})"
            return False
        if size is None:                          # being compiled right now: left alone
            return False
        self.entries += 1
        self.bytes += size
        return True

    def removal(self) -> Removal:
        return Removal(self.entries, self.bytes, self.failed, self.error)


def prune(entries_root: Path, max_bytes: int) -> Removal:
    """Remove damaged entries, then least recently used ones, until the cache holds at most
    `max_bytes`. The most recently used entries are the ones kept."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise ValueError(f"prune: max_bytes must be a non-negative int, got {max_bytes!r} "
                         f"(the CLI accepts sizes like '500MB')")
    sweep_leftovers(entries_root)
    entries, broken = scan(entries_root)
    tally = _Tally()
    for path in broken:
        tally.remove(entries_root, path)
    total = sum(e.size_bytes for e in entries)
    for entry in sorted(entries, key=lambda e: (e.last_used, e.key)):
        if total <= max_bytes:
            break
        if tally.remove(entries_root, entry.path):
            total -= entry.size_bytes
    return tally.removal()
