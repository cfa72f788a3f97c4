"""The process-wide disk store the backends call: load / store a compiled binary, or the
verified module file the cpu backend imports and numba caches beside.

Robustness rules (issue 6, point 4), all implemented here:
- every file is published with write_atomic (temp file + os.replace);
- meta.json is written last, so a reader that finds it finds complete files;
- a truncated, altered, foreign or unreadable file is a miss with one CacheWarning per key
  per process; the caller recompiles and `store` rewrites the entry;
- processes racing on one key each publish whole files, so the entry ends valid whoever
  wins each replace (every binary carries its own hash and key);
- a directory we cannot write (read-only, full, no permission) turns writing off for the
  process with one warning: kernels then live in memory only. Reading stays on, so a shared
  read-only cache still serves hits.
"""
from __future__ import annotations

import errno
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..locks import import_for_compile
from ..log import compiling, warn
from . import lock_wait, settings
from .entry_format import (BINARY_FILE, FILE_MAX_BYTES, META_FILE, META_MAX_BYTES, DamagedEntry,
                           decode_meta, encode_meta, pack_binary, read_entry_file,
                           source_file_name, unpack_binary, write_atomic)
from .keys import FORMAT_VERSION, CacheKey, make_key, sha256_hex
from .modules import ModuleEntries

# Errors that mean "this directory will not take writes", as opposed to a one-off race.
_UNWRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.ENOTDIR,
               getattr(errno, "EDQUOT", errno.ENOSPC)}



def same_bytes(path: Path, data: bytes) -> bool:
    """Whether `path` is a regular file holding exactly `data` (never blocks on a FIFO)."""
    try:
        return read_entry_file(path, len(data)) == data
    except (OSError, DamagedEntry):
        return False

class CacheWarning(UserWarning):
    """The disk cache found a damaged entry or could not write; results stay correct."""


def utc_now() -> str:
    """ISO-8601 UTC with microseconds: sorts as text in time order."""
    micros = time.time_ns() // 1000
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(micros // 1_000_000))
    return f"{seconds}.{micros % 1_000_000:06d}Z"


@dataclass
class Counters:
    """What this process did with the cache (qc.cache.stats() adds what is on disk)."""
    memory_hits: int = 0
    disk_hits: int = 0
    misses: int = 0
    compiles: int = 0
    compile_ms: float = 0.0
    damaged: int = 0


class DiskCache(ModuleEntries):
    """The disk level of the kernel cache. One process-wide instance lives at
    `querycompute.cache.disk_cache`; tests may build their own with an explicit root.

    Backend protocol, binaries (CUDA, OpenCL):
        key = disk_cache.make_key(backend=..., compiler=..., device=..., options=..., source=src)
        payload = disk_cache.load(key)               # bytes, or None on a miss
        if payload is None:
            payload = <compile key.source>
            disk_cache.store(key, payload, source_suffix=".cl", kernel_names=..., compile_ms=...)
    Backend protocol, modules (cpu/numba):
        path = disk_cache.load_module(key)           # verified module file, or None
        fresh = path is None
        if fresh:
            path = disk_cache.store_module(key, source_suffix=".py", kernel_names=...)
        module = disk_cache.import_module(path, key)  # numba's cache=True files go beside it
        <call / .compile() each njit function for its signature>
        if fresh or <numba's dispatcher.stats.cache_misses is not empty>:
            disk_cache.seal_module(key, compile_ms=...)   # and report "compiled"
    """

    make_key = staticmethod(make_key)

    def __init__(self, root: str | Path | None = None, enabled: bool | None = None):
        """root None: $QUERYCOMPUTE_CACHE_DIR or the platform default; enabled None:
        $QUERYCOMPUTE_CACHE. Both are read on first use, not here."""
        self._root_arg = root
        self._enabled_arg = enabled
        # What the query layer is compiling right now (its chain as text), for the metadata.
        self._hint = threading.local()    # the query text of the compile this thread runs
        self._lock = threading.Lock()
        self.counters = Counters()
        self._configured = False
        self._private_dir: Path | None = None

    # ----- configuration ---------------------------------------------------------------
    def after_fork(self) -> None:
        """In a forked child: a lock another parent thread held stays held; start afresh."""
        self._lock = threading.Lock()

    @property
    def query_hint(self) -> str:
        """The chain text that the compile running in this thread is for (set by the engine
        around a compile, recorded in the entry's metadata): per thread, as compiles of
        different queries run at once."""
        return getattr(self._hint, "text", "")

    @query_hint.setter
    def query_hint(self, text: str) -> None:
        self._hint.text = text

    def reset(self) -> None:
        """Forget counters, warnings and the unwritable state, and re-read the environment."""
        with self._lock:
            self.counters = Counters()
            self._configured = False

    def _configure(self) -> None:
        if self._configured:
            return
        with self._lock:
            if self._configured:
                return
            root = self._root_arg if self._root_arg is not None else settings.cache_directory()
            self._root = Path(root)
            self._enabled = (settings.disk_cache_enabled() if self._enabled_arg is None
                             else bool(self._enabled_arg))
            self._unwritable_reason: str | None = None
            self._warned: set[str] = set()
            # DESIGN.md section 6, "Trust": kernels are loaded only where nobody else can write
            self._untrusted: str | None = None
            if self._enabled:
                self._untrusted = settings.untrusted_reason(self._root)
                self._enabled = self._untrusted is None
            self._configured = True
            untrusted = self._untrusted
        if untrusted:
            self._warn_once("untrusted",
                            f"querycompute: the kernel cache directory {self._root} is not safe "
                            f"to load kernels from: {untrusted}. Anyone who can write there can "
                            f"plant code this process would run, so the disk cache is off for "
                            f"this process (kernels are compiled and kept in memory). Fix: "
                            f"{settings.fix_hint(self._root)}.")

    @property
    def path(self) -> Path:
        """The cache root directory (it may not exist yet)."""
        self._configure()
        return self._root

    @property
    def enabled(self) -> bool:
        """False when QUERYCOMPUTE_CACHE=0: nothing is read from or written to disk."""
        self._configure()
        return self._enabled

    @property
    def untrusted_reason(self) -> str | None:
        """Why the disk cache is off for this process although QUERYCOMPUTE_CACHE is on: the
        directory is not safe to load kernels from (settings.py, its trust section). None when it is."""
        self._configure()
        return self._untrusted

    @property
    def writable(self) -> bool:
        self._configure()
        return self._enabled and self._unwritable_reason is None

    @property
    def unwritable_reason(self) -> str | None:
        self._configure()
        return self._unwritable_reason

    @property
    def entries_root(self) -> Path:
        """Where this format version's entries live: <path>/v<FORMAT_VERSION>."""
        return self.path / f"v{FORMAT_VERSION}"

    def entry_dir(self, key: CacheKey) -> Path:
        return self.entries_root / key.digest

    # ----- counters --------------------------------------------------------------------
    def note_memory_hit(self) -> None:
        """The query layer calls this when its in-memory dict served a ready kernel. On the
        warm path, so no lock: a statistic may lose a count under a thread race, nothing more."""
        self.counters.memory_hits += 1

    def _count(self, field: str, amount: float = 1) -> None:
        with self._lock:
            setattr(self.counters, field, getattr(self.counters, field) + amount)

    def _warn_once(self, tag: str, message: str) -> None:
        with self._lock:
            if tag in self._warned:
                return
            self._warned.add(tag)
        warn(message, CacheWarning)      # at the user's line (log.py)

    def _damaged(self, key: CacheKey, why: str) -> None:
        self._count("damaged")
        self._count("misses")
        self._warn_once(f"damaged:{key.digest}",
                        f"querycompute: kernel cache entry {key.digest[:16]} ({key.backend}) is "
                        f"damaged: {why}; recompiling and rewriting it ({self.entry_dir(key)})")

    def _untrusted_entry(self, key: CacheKey, *paths: Path) -> bool:
        """True (a miss, with one warning per entry) when one of `paths` of `key`'s entry is
        owned by another user or is a directory others can write (settings.entry_problem): it is
        not read, the kernel is compiled and the entry rewritten."""
        for path in paths:
            problem = settings.entry_problem(path)
            if problem:
                self._count("damaged")
                self._count("misses")
                self._warn_once(f"damaged:{key.digest}",
                                f"querycompute: kernel cache entry {key.digest[:16]} "
                                f"({key.backend}) is not loaded: {problem}; recompiling and "
                                f"rewriting it")
                if path != self.entries_root and self.writable:
                    # away with it, so the rewrite makes the entry's directory ours too
                    from . import inventory
                    try:
                        inventory.remove_entry(self.entries_root, self.entry_dir(key))
                    except OSError:
                        pass                      # the rewrite then fails and says so
                return True
        return False

    def _missing(self, key: CacheKey, what: str) -> None:
        """A file of `key`'s entry is missing: damage while the entry's metadata is still
        there; otherwise the whole entry was removed after it was looked up (`cache prune`
        or `clear` in another process), which is a plain miss."""
        if os.path.lexists(self.entry_dir(key) / META_FILE):
            self._damaged(key, f"{what} is missing")
        else:
            self._count("misses")

    # ----- reading ---------------------------------------------------------------------
    def load(self, key: CacheKey) -> bytes | None:
        """The payload stored for `key`, or None on a miss. A damaged entry is a miss (with
        one CacheWarning); never raises for anything found on disk."""
        meta = self._read_verified_meta(key, "binary")
        if meta is None:
            return None
        entry = self.entry_dir(key)
        if self._untrusted_entry(key, entry / BINARY_FILE):
            return None
        try:
            data = read_entry_file(entry / BINARY_FILE, FILE_MAX_BYTES)
            payload = unpack_binary(key.digest, data)
            if sha256_hex(payload) != meta.get("payload_sha256"):
                raise DamagedEntry("binary and metadata disagree on the payload hash")
        except FileNotFoundError:
            self._missing(key, "the binary file")
            return None
        except DamagedEntry as exc:
            self._damaged(key, str(exc))
            return None
        except OSError as exc:
            self._damaged(key, f"the binary is unreadable ({exc})")
            return None
        self._record_hit(entry, meta)
        return payload

    def _read_verified_meta(self, key: CacheKey, kind: str) -> dict | None:
        """Metadata of a complete, untampered entry of `kind`, its source file checked; None
        (counted as a miss, warned once when something damaged was found) otherwise."""
        if not self.enabled:
            self._count("misses")
            return None
        entry = self.entry_dir(key)
        if self._untrusted_entry(key, self.entries_root, entry, entry / META_FILE):
            return None
        try:
            raw = read_entry_file(entry / META_FILE, META_MAX_BYTES)
        except FileNotFoundError:
            self._count("misses")             # cold, or another process is still writing
            return None
        except DamagedEntry as exc:           # a directory, FIFO, link... in its place
            self._damaged(key, f"the metadata: {exc}")
            return None
        except OSError as exc:
            self._damaged(key, f"the metadata is unreadable ({exc})")
            return None
        try:
            meta = decode_meta(key.digest, raw)
            if meta["kind"] != kind:
                raise DamagedEntry(f"entry holds a {meta['kind']}, expected a {kind}")
            expected_name = source_file_name(key.digest, Path(meta["source_file"]).suffix)
            if meta["source_file"] != expected_name:
                raise DamagedEntry("metadata names a foreign source file")
            if meta["source_sha256"] != key.source_sha256:
                raise DamagedEntry("metadata records another source")
            source = read_entry_file(entry / meta["source_file"], FILE_MAX_BYTES)
            if sha256_hex(source) != key.source_sha256:
                raise DamagedEntry("the source file was altered")
        except FileNotFoundError:
            self._missing(key, "the source file")
            return None
        except (DamagedEntry, ValueError) as exc:
            self._damaged(key, str(exc))
            return None
        except OSError as exc:
            self._damaged(key, f"the source file is unreadable ({exc})")
            return None
        return meta

    def _record_hit(self, entry: Path, meta: dict) -> None:
        self._count("disk_hits")
        meta = dict(meta, last_used=utc_now(), hit_count=meta["hit_count"] + 1)
        try:
            # Racing hits may each count from the same old value; hit_count is a hint for
            # people and prune order, not an exact tally.
            write_atomic(entry / META_FILE, encode_meta(meta))
        except OSError:
            pass                                # a read-only cache still serves hits

    # ----- compiling once across processes ----------------------------------------------
    @contextmanager
    def compile_lock(self, key: CacheKey) -> Iterator[None]:
        """Held while this process compiles `key`. Processes that start the same cold query
        at once would each compile it; with this lock (a file `locks/<key>.lock` beside `v1/`)
        one compiles and the others wait, then load what it stored. Without a writable disk
        cache there is nothing to share and nothing is locked; a lock that cannot be taken
        (an odd filesystem, a holder that uses no CPU for QUERYCOMPUTE_CACHE_LOCK_STALL
        seconds or holds it for ten minutes: lock_wait.py) is skipped with a warning: the
        caller compiles itself, which is slower but never wrong (writes are atomic)."""
        lock = None
        if self.writable:
            filelock = import_for_compile("filelock")    # (first here: a miss's compile)
            FileLock, Timeout = filelock.FileLock, filelock.Timeout
            try:
                locks = self.path / "locks"       # beside v1/, so entry listings never see them
                self._make_dirs(locks)
                path = locks / f"{key.digest}.lock"
                lock = lock_wait.acquire(FileLock(str(path)), path,
                                         f"kernel cache entry {key.digest[:16]}", timeout_s=600)
            except (OSError, Timeout, lock_wait.LockAbandoned) as exc:
                lock = None
                self._warn_once(f"lock:{key.digest}",
                                f"querycompute: could not take the compile lock for kernel cache "
                                f"entry {key.digest[:16]} ({exc}); compiling without it")
        try:
            yield
        finally:
            if lock is not None:
                lock.release()

    def stamp(self, key: CacheKey):
        """What identifies the current version of `key`'s entry (its metadata file's mtime and
        size; None when there is none). Compared before and after waiting for the compile
        lock, it tells an entry another process published meanwhile (load it) from the one
        that was already there (missing, damaged or unsealed: rebuild it). Counts nothing."""
        if not self.enabled:
            return None
        try:
            st = (self.entry_dir(key) / META_FILE).stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def obtain(self, key: CacheKey, compile_fn, use, *, source_suffix: str, kernel_names=(),
               dtypes=(), extra: dict | None = None) -> tuple[Any, str, float]:
        """The one load / compile / store sequence of the binary-caching backends:
        (object, "disk" or "compiled", compile ms).

        `use(payload)` turns a cached payload into the backend's object, or returns None when
        the driver refuses it (the entry is then rebuilt and rewritten); `compile_fn()`
        compiles from source and returns (payload, object). A miss takes `compile_lock`, so
        of several processes missing at once one compiles and the others load its entry."""
        payload = self.load(key)
        obj = use(payload) if payload is not None else None
        if obj is not None:
            return obj, "disk", 0.0
        before = self.stamp(key)
        with self.compile_lock(key):
            if self.stamp(key) not in (None, before):    # published while we waited
                payload = self.load(key)
                obj = use(payload) if payload is not None else None
                if obj is not None:
                    return obj, "disk", 0.0
            t0 = time.perf_counter()
            names = ", ".join(map(str, kernel_names)) or key.digest[:16]
            with compiling(f"the {key.backend} kernels {names}"):      # (log.py: progress)
                payload, obj = compile_fn()
            compile_ms = (time.perf_counter() - t0) * 1e3
            self.store(key, payload, source_suffix=source_suffix, kernel_names=kernel_names,
                       dtypes=dtypes, compile_ms=compile_ms, extra=extra)
        return obj, "compiled", compile_ms

    # ----- writing ---------------------------------------------------------------------
    def store(self, key: CacheKey, payload: bytes, *, source_suffix: str,
              kernel_names=(), query: str = "", dtypes=(), compile_ms: float = 0.0,
              extra: dict | None = None) -> None:
        """Record one compile of `key.source` and publish its `payload` (call it after every
        compile, even when the disk cache is off: it counts compiles). Write failures warn
        and never raise; the caller keeps its kernel either way."""
        if not isinstance(payload, (bytes, bytearray, memoryview)):
            raise TypeError(f"store: payload must be bytes, got {type(payload).__name__}")
        payload = bytes(payload)
        self._count("compiles")
        self._count("compile_ms", float(compile_ms))
        if not self.writable:
            return
        meta = self._new_meta(key, "binary", source_suffix, kernel_names, query, dtypes,
                              compile_ms, extra)
        meta["payload_sha256"] = sha256_hex(payload)
        meta["sizes"] = {"binary": len(payload), "source": len(key.source.encode("utf-8"))}
        if self._publish(key, [(BINARY_FILE, pack_binary(key.digest, payload))], meta):
            self.enforce_max_size()

    def _new_meta(self, key, kind, source_suffix, kernel_names, query, dtypes, compile_ms,
                  extra) -> dict:
        now = utc_now()
        return {
            "format": FORMAT_VERSION, "key": key.digest, "kind": kind,
            "backend": key.backend, "compiler": key.compiler, "device": key.device,
            "options": list(key.options), "kernel_names": [str(k) for k in kernel_names],
            "query": str(query or self.query_hint), "dtypes": [str(d) for d in dtypes],
            "source_file": source_file_name(key.digest, source_suffix),
            "source_sha256": key.source_sha256, "created": now, "last_used": now,
            "compile_ms": round(float(compile_ms), 3), "hit_count": 0,
            "extra": dict(extra or {}),
        }

    def _publish(self, key: CacheKey, files: list[tuple[str, bytes]], meta: dict) -> bool:
        """Write source, then `files`, then meta.json (the completion marker). False (after a
        warning) when the directory would not take the writes."""
        entry = self.entry_dir(key)
        try:
            self._make_dirs(entry)
            source_path = entry / meta["source_file"]
            source = key.source.encode("utf-8")
            # Leave an identical source file alone: rewriting it would change its mtime, and
            # older numba versions key their own cache on the module file's mtime and size.
            if not same_bytes(source_path, source):
                write_atomic(source_path, source)
            for name, data in files:
                write_atomic(entry / name, data)
            write_atomic(entry / META_FILE, encode_meta(meta))
            return True
        except OSError as exc:
            self._write_failed(key, exc)
            return False

    def enforce_max_size(self) -> None:
        """After a save: with QUERYCOMPUTE_CACHE_MAX_SIZE set and the cache over it, remove the
        least recently used entries (inventory.prune, as `querycompute cache prune`; an entry
        being compiled, this one included, is left alone)."""
        limit = settings.max_size()
        if limit is None or not self.writable:
            return
        from . import inventory                   # loads with the first save over a cap
        inventory.prune(self.entries_root, limit)

    def _write_failed(self, key: CacheKey, exc: OSError) -> None:
        """A write into `key`'s entry failed (ours, or numba's cache files: modules.py).
        A directory that will not take writes turns writing off for the process, with one
        warning; anything else (the entry removed under us) skips this entry. Never raises:
        the caller keeps its kernel in memory."""
        if exc.errno in _UNWRITABLE:
            self._unwritable_reason = f"{exc.strerror or exc} ({exc.filename or self.path})"
            self._warn_once("unwritable",
                            f"querycompute: cannot write the kernel cache at {self.path}: "
                            f"{self._unwritable_reason}. Compiled kernels are kept in memory "
                            f"only for this process; set QUERYCOMPUTE_CACHE_DIR to a writable "
                            f"directory, or QUERYCOMPUTE_CACHE=0 to turn the disk cache off.")
        else:       # e.g. `cache clear` removed the directory under us: skip this entry
            self._warn_once(f"write:{key.digest}",
                            f"querycompute: could not write kernel cache entry "
                            f"{key.digest[:16]} ({exc}); it will be compiled again next time.")

    def _make_dirs(self, entry: Path) -> None:
        # Every level we create is 0700: kernels and query text are the user's business.
        for directory in (self.path, self.entries_root, entry):
            try:
                directory.mkdir(mode=0o700, parents=directory == self.path)
            except FileExistsError:
                continue
