"""The cpu backend's kind of entry: a generated Python module that numba compiles and caches
beside itself (cache=True writes __pycache__/*.nbi/*.nbc next to the module file).

numba's cache files are pickles, so they are only ever left for numba to read while they
hash to what `seal_module` recorded right after numba wrote them; the module itself is only
imported while it hashes to the key's source. DiskCache inherits these methods.
"""
from __future__ import annotations

import atexit
import inspect
import os
import shutil
import stat
import struct
import sys
import tempfile
import types
from functools import lru_cache
from pathlib import Path

from .entry_format import (FILE_MAX_BYTES, META_FILE, META_MAX_BYTES, DamagedEntry,
                           decode_meta, encode_meta, read_entry_file, source_file_name,
                           write_atomic)
from .keys import CacheKey, sha256_hex

# Where numba's cache=True puts its files for a module: beside it, in __pycache__.
NUMBA_DIR = "__pycache__"
# The cpu backend's numba-free payload of the same code (backends/cpu/native_loader.py), kept
# beside numba's files and sealed with them (removed with them when the module is stored again)
NATIVE_FILE = "querycompute.native"


def _remove_files(directory: Path, keep: set) -> None:
    """Delete what `directory` holds besides the regular files named in `keep` (best
    effort): files, and directories, links or FIFOs squatting on a file's name, which numba
    could neither read nor replace. A `directory` that is not a directory is removed."""
    try:
        if not stat.S_ISDIR(os.lstat(directory).st_mode):
            directory.unlink()
            return
        paths = list(directory.iterdir())
    except OSError:
        return
    for path in paths:
        if path.name.endswith(".tmp"):
            continue
        try:
            mode = os.lstat(path).st_mode
            if stat.S_ISDIR(mode):
                shutil.rmtree(path)
            elif path.name not in keep or not stat.S_ISREG(mode):
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
        if self._untrusted_entry(key, entry / meta["source_file"], entry / NUMBA_DIR,
                                 *(entry / NUMBA_DIR / Path(name).name for name in sealed)):
            return None
        try:
            for name, digest in sealed.items():
                if Path(name).name != name:
                    raise DamagedEntry("metadata seals a numba cache file outside the entry")
                try:
                    data = read_entry_file(entry / NUMBA_DIR / name, FILE_MAX_BYTES)
                except DamagedEntry as exc:
                    raise DamagedEntry(f"numba cache file {exc}") from None
                if sha256_hex(data) != digest:
                    raise DamagedEntry(f"numba cache file {name} was altered")
        except FileNotFoundError:
            self._missing(key, "a numba cache file")
            return None
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
            meta = decode_meta(key.digest, read_entry_file(entry / META_FILE, META_MAX_BYTES))
            sealed = {}
            cache_dir = entry / NUMBA_DIR
            for path in sorted(cache_dir.iterdir()) if cache_dir.is_dir() else ():
                if path.name.endswith(".tmp") or ".tmp." in path.name:    # ours, numba's
                    continue
                try:
                    sealed[path.name] = sha256_hex(read_entry_file(path, FILE_MAX_BYTES))
                except (FileNotFoundError, DamagedEntry):
                    continue              # not a file numba wrote; load_module removes it
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
            self.enforce_max_size()
        except FileNotFoundError:
            return      # the entry was removed since (a prune in another process): a miss
        except (OSError, DamagedEntry) as exc:
            self._warn_once(f"seal:{key.digest}",
                            f"querycompute: could not seal kernel cache entry {key.digest[:16]} "
                            f"({exc}); it will be compiled again next time.")

    def load_native(self, key: CacheKey, count: bool = True) -> bytes | None:
        """The numba-free payload sealed into `key`'s module entry (`store_native`), or None
        (not counted: the caller then looks the entry up with `import_entry`, which counts).
        Only that file is read and checked against its seal: numba's files are not needed.
        count=False: a look at what the entry holds, not a hit."""
        entry = self.entry_dir(key)
        if not self.enabled or not os.path.lexists(entry / META_FILE):
            return None
        meta = self._read_verified_meta(key, "module")
        sealed = meta.get("sealed_files") if meta is not None else None
        if not isinstance(sealed, dict) or NATIVE_FILE not in sealed:
            return None
        path = entry / NUMBA_DIR / NATIVE_FILE
        if self._untrusted_entry(key, entry / NUMBA_DIR, path):
            return None
        try:
            data = read_entry_file(path, FILE_MAX_BYTES)
        except (OSError, DamagedEntry):
            return None                       # numba's own load then checks the entry
        if sha256_hex(data) != sealed[NATIVE_FILE]:
            return None
        if count:
            self._record_hit(entry, meta)
        return data

    def store_native(self, key: CacheKey, data: bytes) -> None:
        """Write the numba-free payload of `key`'s sealed module entry and seal it with numba's
        files (best effort: a failure leaves numba's load for the next process)."""
        if not self.writable:
            return
        entry = self.entry_dir(key)
        try:
            meta = decode_meta(key.digest, read_entry_file(entry / META_FILE, META_MAX_BYTES))
            if not isinstance(meta.get("sealed_files"), dict):
                return
            path = entry / NUMBA_DIR / NATIVE_FILE
            if NATIVE_FILE in meta["sealed_files"] and os.path.isfile(path) and path.read_bytes() == data:
                return                        # already there (numba loaded the same code)
            write_atomic(path, data)
        except (OSError, DamagedEntry):
            return
        self.seal_module(key)

    def import_module(self, path: Path, key: CacheKey):
        """Import the module file at `path` if its bytes hash to `key`'s source hash: only
        source this package wrote for this key is ever executed. The verified bytes are the
        ones executed (no second read, no bytecode cache), under the file's name so numba
        finds the file to cache beside and tracebacks show its lines."""
        path = Path(path)
        source = read_entry_file(path, FILE_MAX_BYTES)
        if sha256_hex(source) != key.source_sha256:
            raise RuntimeError(f"querycompute: refusing to import {path}: its contents do not "
                               f"match the generated source for key {key.digest[:16]}")
        return self._exec_module(path, key, source)

    def import_entry(self, key: CacheKey):
        """`load_module` and `import_module` as one step: the module of `key`'s entry, or
        None on a miss, which includes an entry that changed or was removed (a `cache prune`
        in another process) between the lookup and the import."""
        path = self.load_module(key)
        if path is None:
            return None
        try:
            source = read_entry_file(path, FILE_MAX_BYTES)
            if sha256_hex(source) != key.source_sha256:
                raise DamagedEntry("the module file changed after it was checked")
            return self._exec_module(path, key, source)
        except DamagedEntry as exc:
            self._damaged(key, str(exc))
            return None
        except (OSError, RuntimeError) as exc:
            # numba's decorator also reads the file (and fails without it: RuntimeError)
            if os.path.lexists(path):
                if isinstance(exc, RuntimeError):
                    raise
                self._damaged(key, f"the module file is unreadable ({exc})")
            else:
                self._count("misses")             # removed since load_module found it
            return None

    def _exec_module(self, path: Path, key: CacheKey, source: bytes):
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
        _guard_numba_caches(module, self, key)
        return module

    def _private_directory(self) -> Path:
        with self._lock:
            if self._private_dir is None:
                self._private_dir = Path(tempfile.mkdtemp(prefix="querycompute-kernels-"))
                atexit.register(shutil.rmtree, self._private_dir, True)
            return self._private_dir


class _GuardedNumbaCache:
    """numba's cache of one function of an entry's module (`Dispatcher._cache`), made so that
    nothing on disk fails a query: a cache file numba cannot read (a directory in its place,
    permissions) is a damaged entry, i.e. a warning and a compile; a save that fails (a full
    or read-only disk, the entry removed by a prune in another process) is a warning and the
    code stays in memory (numba adds it to the dispatcher before saving)."""

    def __init__(self, inner, store, key: CacheKey):
        self._inner, self._store, self._key = inner, store, key

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def load_overload(self, sig, target_context):
        try:
            return self._inner.load_overload(sig, target_context)
        except OSError as exc:
            self._store._damaged(self._key, f"a numba cache file is unreadable ({exc})")
            return None

    def save_overload(self, sig, data) -> None:
        try:
            self._inner.save_overload(sig, data)
        except OSError as exc:
            self._store._write_failed(self._key, exc)


def _guard_numba_caches(module: types.ModuleType, store, key: CacheKey) -> None:
    """Wrap the cache of every numba function `module` defines in a _GuardedNumbaCache."""
    dispatcher = sys.modules.get("numba.core.dispatcher")
    if dispatcher is None:
        return                  # numba is not imported: the module defines no numba function
    namespace = vars(module)
    for obj in list(namespace.values()):
        if (isinstance(obj, dispatcher.Dispatcher)
                and getattr(obj.py_func, "__globals__", None) is namespace
                and not isinstance(obj._cache, _GuardedNumbaCache)):
            # numba's files only ever beside the module, where load_module verified them
            obj._cache = _GuardedNumbaCache(entry_cache(obj), store, key)


# ---- where numba keeps an entry's cache files ---------------------------------------------
# Where numba keeps the cache files of an entry's module: always beside the module, in the
# entry's __pycache__/, the only place load_module verifies (numba's cache files are pickles).
#
# numba itself picks the first place that works from a list: $NUMBA_CACHE_DIR, then beside the
# module if that directory is writable, then its user-wide ~/.cache/numba. On a read-only cache
# directory (or with NUMBA_CACHE_DIR set) it would quietly read and write pickles there, which
# nothing verifies, while the trace said `disk`. `entry_cache` gives a function numba's own
# cache machinery bound to the entry's __pycache__/ whatever the environment says: on a
# read-only entry numba reads the sealed files load_module checked, and a save fails (the
# guard in modules.py warns and the kernel stays in memory). numba is imported by the caller
# (a module with numba functions was just executed), so importing it here costs nothing.

def _needs_refresh(payload) -> bool:
    """Whether a cached specialisation's machine code refers to a symbol the process does not
    define yet: one that only an import of numba's registries adds (numba.cpython.hashing's
    hash secret, for code that hashes strings), which numba's full refresh then provides. An
    ELF64 little-endian object (Linux) is read for its undefined symbols, each looked up as
    LLVM will link it (MCJIT links an unknown one to address 0, a crash at the call); any other
    payload gets the full refresh, as numba's own load does."""
    try:
        _name, kind, data = payload[0]
        undefined = elf_undefined(bytes(data[0])) if kind == "object" else None
    except Exception:
        undefined = None
    if undefined is None:
        return True
    from llvmlite import binding as ll
    return any(not ll.address_of_symbol(name) for name in undefined)


def elf_undefined(obj: bytes) -> list[str] | None:
    """The undefined symbols of an ELF64 little-endian object file (None: another format)."""
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for _n, sh_type, _f, _a, offset, size, link, _i, _al, entsize in sections:
        if sh_type != 2 or not entsize:          # SHT_SYMTAB
            continue
        strings = sections[link][4]
        for i in range(size // entsize):
            name, _info, _other, shndx, _value, _size = struct.unpack_from("<IBBHQQ", obj, offset + i * entsize)
            if shndx == 0 and name:              # SHN_UNDEF
                start = strings + name
                names.append(obj[start:obj.index(b"\0", start)].decode("ascii", "replace"))
    return names


@lru_cache(maxsize=1)
def _function_cache_class():
    from numba.core import caching
    from numba.core.runtime import rtsys

    class EntryLocator(caching.InTreeCacheLocator):
        """numba's in-tree locator (`<module dir>/__pycache__`), also where it is read-only."""

        @classmethod
        def from_function(cls, py_func, py_file):
            locator = cls(py_func, py_file)
            try:
                locator.ensure_cache_path()
            except OSError:
                pass        # read-only: the sealed files are read; saving fails (warned)
            return locator

    class EntryCacheImpl(caching.CompileResultCacheImpl):
        def __init__(self, py_func):
            super().__init__(py_func)     # names the files as numba does
            # ...but they live beside the module, whatever numba's own search found
            self._locator = EntryLocator.from_function(py_func, inspect.getfile(py_func))

    class EntryFunctionCache(caching.FunctionCache):
        _impl_class = EntryCacheImpl

        def load_overload(self, sig, target_context):
            """numba's load of a cached specialisation, without its refresh of the target
            context first: that refresh imports and installs every typing and lowering
            registry numba has (numpy's ufuncs, datetimes, typed containers, ...: ~150-250 ms
            the first time in a process), which a compile needs (numba's compiler refreshes
            the contexts itself) but loading machine code does not. What the code links
            against is made ready here: the NRT's symbols (`rtsys.initialize`, which the
            refresh would have done); code naming a symbol still undefined (the hash
            secret's, which numba.cpython.hashing adds on import) gets the full refresh first."""
            if not self._enabled:
                return None
            rtsys.initialize(target_context)
            with self._guard_against_spurious_io_errors():
                data = self._cache_file.load(self._index_key(sig, target_context.codegen()))
                if data is None:
                    return None
                if _needs_refresh(data):
                    target_context.refresh()
                return self._impl.rebuild(target_context, data)
            return None     # an I/O error numba's guard swallowed (Windows)

    return EntryFunctionCache


def cached_specialisations(dispatcher):
    """Every specialisation numba cached for `dispatcher` (a function of an entry's module,
    numba imported), read from its files without loading it: (argument types, numba's magic
    tuple of the code, object file, fndesc, environment, referenced environments). Object-mode
    or lifted code, and any other payload kind than an object file, are left out."""
    cache = getattr(dispatcher, "_cache", None)
    cache_file = getattr(getattr(cache, "_inner", cache), "_cache_file", None)
    if cache_file is None:
        return
    for key, data_name in cache_file._load_index().items():
        data = cache_file._load_data(data_name)
        if data is None:
            continue
        libdata, fndesc, env, _sig, objectmode, lifted, _ann, reload_init, refenvs = data
        _name, kind, payload = libdata
        if objectmode or lifted or reload_init or kind != "object":
            continue
        yield key[0], key[1], payload[0], fndesc, env, refenvs


def entry_cache(dispatcher):
    """A numba cache for `dispatcher` (a function of an entry's module, not yet called) whose
    files are read from and written to the module's own __pycache__/ only (a function
    without cache=True keeps numba's NullCache)."""
    if type(dispatcher._cache).__name__ == "NullCache":
        return dispatcher._cache
    return _function_cache_class()(dispatcher.py_func)
