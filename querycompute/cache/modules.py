"""The cpu backend's kind of entry: a generated Python module that numba compiles and caches
beside itself (cache=True writes __pycache__/*.nbi/*.nbc next to the module file).

numba's cache files are pickles, so they are only ever left for numba to read while they
hash to what `seal_module` recorded right after numba wrote them; the module itself is only
imported while it hashes to the key's source. DiskCache inherits these methods.
"""
from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
import types
from pathlib import Path

from .entry_format import (META_FILE, DamagedEntry, decode_meta, encode_meta,
                           source_file_name, write_atomic)
from .keys import CacheKey, sha256_hex

# Where numba's cache=True puts its files for a module: beside it, in __pycache__.
NUMBA_DIR = "__pycache__"


def same_bytes(path: Path, data: bytes) -> bool:
    try:
        return path.read_bytes() == data
    except OSError:
        return False


def _remove_files(directory: Path, keep: set) -> None:
    """Delete the files of `directory` not named in `keep` (best effort)."""
    try:
        paths = list(directory.iterdir())
    except OSError:
        return
    for path in paths:
        if path.name not in keep and not path.name.endswith(".tmp"):
            try:
                path.unlink()
            except OSError:
                pass


class ModuleEntries:
    """load_module / store_module / seal_module / import_module of DiskCache."""

    def load_module(self, key: CacheKey) -> Path | None:
        """The path of the module file stored for `key`, or None on a miss. A hit means the
        module's bytes hash to the key's source hash and every file numba cached beside it
        (__pycache__/) still has the hash `seal_module` recorded: numba unpickles those
        files, so nothing unverified is left for it to read. Import with `import_module`."""
        meta = self._read_verified_meta(key, "module")
        if meta is None:
            return None
        entry = self.entry_dir(key)
        sealed = meta.get("sealed_files")
        if not isinstance(sealed, dict):
            self._count("misses")        # compiled but not sealed yet: in progress or crashed
            return None
        try:
            for name, digest in sealed.items():
                path = entry / NUMBA_DIR / name
                if Path(name).name != name or not path.is_file():
                    raise DamagedEntry(f"numba cache file {name} is missing")
                if sha256_hex(path.read_bytes()) != digest:
                    raise DamagedEntry(f"numba cache file {name} was altered")
        except DamagedEntry as exc:
            self._damaged(key, str(exc))
            return None
        except OSError as exc:
            self._damaged(key, f"a numba cache file is unreadable ({exc})")
            return None
        _remove_files(entry / NUMBA_DIR, keep=set(sealed))
        self._record_hit(entry, meta)
        return entry / meta["source_file"]

    def store_module(self, key: CacheKey, *, source_suffix: str = ".py", kernel_names=(),
                     query: str = "", dtypes=(), compile_ms: float = 0.0,
                     extra: dict | None = None) -> Path:
        """Write `key.source` as an importable module file and return its path; the caller
        imports it, lets numba compile (cache=True puts numba's files in __pycache__/ beside
        it), then calls `seal_module`. Counts one compile. Files numba left there before are
        unverified and deleted first. When the disk cache is off or unwritable the module
        goes to a private temporary directory removed at exit: same code path for callers."""
        self._count("compiles")
        self._count("compile_ms", float(compile_ms))
        name = source_file_name(key.digest, source_suffix)
        if self.writable:
            meta = self._new_meta(key, "module", source_suffix, kernel_names, query, dtypes,
                                  compile_ms, extra)
            meta["sizes"] = {"source": len(key.source.encode("utf-8"))}
            if self._publish(key, [], meta):
                # Files only, never the directory: a process compiling this key right now
                # recreates what it needs, while removing __pycache__ under it could fail it.
                _remove_files(self.entry_dir(key) / NUMBA_DIR, keep=set())
                return self.entry_dir(key) / name
        path = self._private_directory() / name
        write_atomic(path, key.source.encode("utf-8"))
        return path

    def seal_module(self, key: CacheKey, compile_ms: float | None = None, *,
                    new_compile: bool = False) -> None:
        """Call after numba has compiled (and cached) every function of the module stored
        with `store_module`: records the SHA-256 of each file numba wrote, so later
        processes load them only while they are intact, and the compile time if given.
        With no numba files to seal the entry stays unsealed, i.e. a miss. Call it again
        after numba compiles more of the module: it re-records the files and adds the time;
        pass new_compile=True when that compile followed a disk hit (store_module, which
        counts a compile, was not called), so this process's stats count it."""
        if new_compile:
            self._count("compiles")
        if compile_ms is not None:
            self._count("compile_ms", float(compile_ms))
        if not self.writable:
            return
        entry = self.entry_dir(key)
        try:
            meta = decode_meta(key.digest, (entry / META_FILE).read_bytes())
            sealed = {}
            cache_dir = entry / NUMBA_DIR
            if cache_dir.is_dir():
                for path in sorted(cache_dir.iterdir()):
                    if path.is_file() and not path.name.endswith(".tmp"):
                        sealed[path.name] = sha256_hex(path.read_bytes())
            if not sealed:
                # Nothing to seal: numba did not cache (or a racing store_module removed its
                # files). Left unsealed, the entry stays a miss and the next process compiles
                # and seals it, rather than "hitting" and recompiling in every process.
                return
            meta["sealed_files"] = sealed
            meta["sizes"] = dict(meta.get("sizes") or {},
                                 numba_cache=sum((cache_dir / n).stat().st_size for n in sealed))
            if compile_ms is not None:
                # added, not replaced: a backend seals again after numba compiles another
                # entry point of the module, and the entry's cost is all of its compiles
                meta["compile_ms"] = round(float(meta.get("compile_ms") or 0) + compile_ms, 3)
            write_atomic(entry / META_FILE, encode_meta(meta))
        except (OSError, DamagedEntry) as exc:
            self._warn_once(f"seal:{key.digest}",
                            f"querycompute: could not seal kernel cache entry {key.digest[:16]} "
                            f"({exc}); it will be compiled again next time.")

    def import_module(self, path: Path, key: CacheKey):
        """Import the module file at `path` if its bytes hash to `key`'s source hash: only
        source this package wrote for this key is ever executed. The verified bytes are the
        ones executed (no second read, no bytecode cache), under the file's name so numba
        finds the file to cache beside and tracebacks show its lines."""
        path = Path(path)
        source = path.read_bytes()
        if sha256_hex(source) != key.source_sha256:
            raise RuntimeError(f"querycompute: refusing to import {path}: its contents do not "
                               f"match the generated source for key {key.digest[:16]}")
        name = f"querycompute_kernels_{key.digest[:16]}"
        loaded = sys.modules.get(name)
        if loaded is not None and getattr(loaded, "__file__", None) == str(path):
            return loaded
        module = types.ModuleType(name)
        module.__file__ = str(path)
        sys.modules[name] = module        # numba resolves a function's module by name
        try:
            exec(compile(source, str(path), "exec", dont_inherit=True), module.__dict__)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module

    def _private_directory(self) -> Path:
        with self._lock:
            if self._private_dir is None:
                self._private_dir = Path(tempfile.mkdtemp(prefix="querycompute-kernels-"))
                atexit.register(shutil.rmtree, self._private_dir, True)
            return self._private_dir
