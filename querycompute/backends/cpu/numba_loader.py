"""The cpu backend's one way to load numba code: every module it runs -- a fused pass
(cpu.py), the stage kernels (cpu_stages, cpu_group, cpu_join, cpu_group_fused), a scan, the
long-row kernels (rows_numba.py) and the column reduction (rows_columns.py) -- is a module
TEXT that `load` makes ready through the disk cache (docs/cache.md):

  1. memory: one module per text and process (`_modules`);
  2. disk: the text is stored in a kernel-cache entry under the cpu backend's key
     (cache_key below: the text, numba's identity and options) and imported from there,
     so numba's cache=True files sit beside it; a later process imports the sealed entry and
     numba loads each entry point's code from those files on its first call ("disk");
     a module loaded with native=True (the generic kernels, a group_by's modules) is read
     from the entry's numba-free payload instead, without importing numba (native_loader.py),
     numba's load being its fallback;
  3. a miss: under the cache's compile lock (of several processes starting the same cold
     query, one compiles and seals the entry, the others then load it), the text is stored
     and imported, `prepare(namespace)` may compile entry points at once (so errors show
     with the source), and the entry is sealed.
Every function of a text must carry cache=True, so that numba writes its code beside the
entry. numba compiles an entry point on its first call with new argument types: `call`
reports that (numba's compiler time as compile time: jit_ms_since, below) and seals the new files.

A `NumbaModule` says where its code came from once ("compiled", "disk"), then "memory":
`take_load_report` for callers that launch its functions themselves (cpu.py's Launch), or
the first `call`. The fixed kernel files of this folder (cpu_*_kernels.py,
ops/rows/cpu_kernels.py) are texts too, never imported: `kernel_files` and
`stage_kernels_source` assemble them.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from functools import lru_cache
from pathlib import Path

from querycompute._codegen import order_keys
from querycompute._codegen.dialects import numba_py
from querycompute._codegen.ops.scan import fused_cpu as numba_scan_fused
from querycompute._codegen.dialects.numba_py_runtime import PRELUDE
from querycompute._codegen.ir.program import Pass

from ... import after_fork, log
from ...cache import disk_cache, dump_source, numba_identity
from ...cache.modules import cached_specialisations
from ...errors import CompileError
from ...artifacts import ArtifactCache
from ...locks import KeyedLocks
from ..registry import load_compiler
from . import native_loader

# ---- the cpu module as it is compiled and cached ------------------------------------------------
# The cpu backend's module as it is compiled and cached: the numba dialect's source made
# importable on its own, with numba's own cache switched on, and its disk-cache key.
#
# codegen.dialects.numba_py prints a module meant to run in numba_py_runtime.namespace(); here
# it is printed with `cache=True` on every function, so numba writes its compiled code into
# __pycache__/ beside the file, where the disk cache seals it, and starts with
# numba_py_runtime.PRELUDE, the two lines that pull that namespace in (so the file, imported
# from its cache entry, runs as it is).


def module_source(p: Pass) -> str:
    """The exact text the cpu backend writes, imports and numba compiles for pass p (a
    pass fused after a scan brings the scan's functions: ops/scan/fused_cpu.py)."""
    if getattr(p, "scan", None) is not None:
        return numba_scan_fused.render(p, cache=True)
    return PRELUDE + numba_py.render(p, cache=True)


FLAGS = ('error_model="numpy"', "fastmath=False")     # on every generated function


def _settings(opt, boundscheck, cpu_name, cpu_features) -> tuple[str, ...]:
    return FLAGS + (f"NUMBA_OPT={opt}", f"NUMBA_BOUNDSCHECK={boundscheck}",
                    f"NUMBA_CPU_NAME={cpu_name or ''}", f"NUMBA_CPU_FEATURES={cpu_features or ''}")


@lru_cache(maxsize=1)
def numba_options() -> tuple[str, ...]:
    """The decorator flags every generated function carries, plus numba's settings that
    change the machine code it makes (numba keys its own files on the CPU name and features,
    not on the optimisation level or bounds checking)."""
    from numba.core import config
    return _settings(config.OPT, config.BOUNDSCHECK, config.CPU_NAME, config.CPU_FEATURES)


# numba_options() under numba's defaults, known without importing numba: the native route
# (native_loader.runtime) runs only where no NUMBA_* variable or .numba_config.yaml is set
DEFAULT_OPTIONS = _settings("_OptLevel(3)", None, None, None)


@lru_cache(maxsize=2)
def _identity(imported: bool = True) -> tuple[str, str]:
    return numba_identity(imported)


def cache_key(source: str, native: bool = False):
    """The disk-cache key of a module source from `module_source`; native: computed without
    importing numba (numba's defaults, its version from its installed metadata)."""
    if native:
        (compiler, device), options = _identity(False), DEFAULT_OPTIONS
    else:
        (compiler, device), options = _identity(), numba_options()
    return disk_cache.make_key(backend="cpu", compiler=compiler, device=device,
                               options=options, source=source)


_modules = ArtifactCache("cpu: numba modules")  # text -> its loaded module (artifacts.py)
_loading = KeyedLocks()                       # one thread imports a text: another would see
after_fork.register(_loading.after_fork)      # it half executed


class NumbaModule:
    def __init__(self, name: str, source: str, ns: dict, key, origin: str, compile_ms: float,
                 native: bool = False, dtypes=()):
        self.name, self.source, self.ns, self.key = name, source, ns, key
        self.origin, self.compile_ms = origin, compile_ms      # of the load, reported once
        self.native, self.dtypes = native, dtypes    # native: keeps native_loader's payload
        self._real = None if isinstance(ns, _NativeNamespace) else ns
        self._native_index = None         # "function|fingerprint" of the entry's payload
        self._count()

    def _count(self) -> None:
        self._dispatchers = [v for v in self.ns.values() if hasattr(v, "overloads") and hasattr(v, "stats")]
        self._known = self._specialisations()
        self._misses = self._cache_misses()

    def numba_ns(self) -> dict:
        """The module's namespace as numba runs it (its dispatchers): a module loaded by the
        native route (native_loader) imports numba and its entry here, once, and its own
        namespace then holds numba's dispatchers too (a fallback: an argument type or a
        name the payload has not, or another module's functions that call these)."""
        if self._real is None:
            with _loading.hold(self.source):
                if self._real is None:
                    load_compiler("numba")
                    real = _load_new(self.name, self.source, None, self.dtypes, self.key)
                    dict.update(self.ns, real.ns)
                    self._count()
                    self._real = real.ns
        return self._real

    def _store_native(self, compiled: bool) -> None:
        """Write (or bring up to date) the numba-free payload of this module's entry from the
        specialisations numba cached for it (native_loader.capture; best effort): after a
        compile, or a load from numba's files of code the payload does not hold yet."""
        if not self.native or native_loader.runtime() is None:
            return
        ns = self.numba_ns()
        if not compiled:
            if self._native_index is None:          # what the entry's payload holds
                data = disk_cache.load_native(self.key, count=False)
                self._native_index = set(native_loader.payload_index(data or b"") or ())
            if native_loader.loaded_index(ns) <= self._native_index:
                return
        try:
            got = native_loader.capture(ns, cached_specialisations)
        except Exception:
            return
        if got is not None:
            disk_cache.store_native(self.key, got[0])
            self._native_index = set(got[1])

    def _specialisations(self) -> int:
        return sum(len(d.overloads) for d in self._dispatchers)

    def _cache_misses(self) -> int:
        return sum(sum(d.stats.cache_misses.values()) for d in self._dispatchers)

    def sync(self) -> None:
        """Seal the code numba added to this module's files from outside a `call`: another
        module's functions that call these (cpu_group.USES_KERNELS) make numba compile new
        specialisations of them, which it writes beside this module's entry."""
        known = self._specialisations()
        if known != self._known:
            self._known = known
            misses = self._cache_misses()
            compiled = misses > self._misses
            if compiled:
                self._misses = misses
                disk_cache.seal_module(self.key, compile_ms=0.0, new_compile=True)
            self._store_native(compiled)

    def take_load_report(self) -> tuple[str, float]:
        """(origin, ms) of the module's load the first time asked, then ("memory", 0.0)."""
        report = self.origin, self.compile_ms
        self.origin, self.compile_ms = "memory", 0.0
        return report

    def call(self, fn: str, *args, runner=None):
        """(result of entry point `fn`, cache origin, compile ms, run ms). A call that made
        numba compile or load code reports it (numba's compiler time inside the call counts
        as compile time, the rest as run time) and seals the new files into the cache entry.
        `runner(entry point)`: how to call it instead of with `args` (the morsel scheduler:
        its first morsel runs on this thread, so a compile lands here and is booked)."""
        t0 = time.perf_counter()
        try:
            result = self.ns[fn](*args) if runner is None else runner(self.ns[fn])
        except Exception as exc:
            if type(exc).__module__.startswith("numba"):      # typing/lowering: show source
                raise CompileError("numba", f"{type(exc).__name__}: {exc}", self.source,
                                   numba_options()) from exc
            raise
        ms = (time.perf_counter() - t0) * 1e3
        origin, compile_ms = self.take_load_report()
        # new specialisations come only from numba's compiler (a compile or a load from its
        # cache), which this thread entered during the call if at all (a morsel run's first
        # morsel runs here): a warm call skips counting them
        known = self._specialisations() if jit_ran_since(t0) else self._known
        if known != self._known:
            self._known = known
            misses = self._cache_misses()
            compiled = misses > self._misses
            self._misses = misses
            jit_ms = min(jit_ms_since(t0), ms)    # numba's compiler inside the call
            if compiled:
                disk_cache.seal_module(self.key, compile_ms=jit_ms, new_compile=True)
            origin = "compiled" if compiled or origin == "compiled" else "disk"
            compile_ms += jit_ms
            ms -= jit_ms
            self._store_native(compiled)
        return result, origin, compile_ms, ms


def load(name: str, source: str, prepare=None, dtypes=(), native: bool = False) -> NumbaModule:
    """The module of `source` (memory, disk cache, or stored and imported now). `prepare`:
    a function of the namespace run once on a freshly stored module, before it is sealed
    (cpu.py compiles the serial entry there); `dtypes`: the input dtypes, for the entry's
    metadata. native: the module is only called through `call` and `ns` (its functions and
    plain constants), so a disk hit may load it without numba (native_loader), and its entry
    keeps that route's payload up to date."""
    hit = _modules.get(source)
    if hit is not None:
        return hit
    if native:
        with _loading.hold(source):
            hit = _modules.get(source)
            if hit is None:
                hit = _load_native(name, source, dtypes)
                if hit is not None:
                    _modules.put(source, hit)
        if hit is not None:
            return hit
    load_compiler("numba")              # numba's modules, imported once under the import lock
    with _loading.hold(source):
        hit = _modules.get(source)
        if hit is None:
            hit = _modules.put(source, _load_new(name, source, prepare, dtypes, native=native))
        return hit


class _NativeNamespace(dict):
    """A natively loaded module's namespace: its functions (native_loader.NativeEntry) and
    plain constants; another name loads the module through numba (NumbaModule.numba_ns)."""

    def __init__(self, values: dict, module_ref: list):
        super().__init__(values)
        self._module = module_ref

    def __missing__(self, name):
        return self._module[0].numba_ns()[name]


def _load_native(name: str, source: str, dtypes) -> NumbaModule | None:
    """A disk hit loaded by native_loader without importing numba, or None (numba's load)."""
    if native_loader.runtime() is None:
        return None
    t0 = time.perf_counter()
    key = cache_key(source, native=True)
    data = disk_cache.load_native(key)
    if data is None:
        return None
    try:
        nm = native_loader.NativeModule(data)
    except native_loader.Unavailable:
        return None
    ref: list = []
    fallback = lambda fn: ref[0].numba_ns()[fn]     # noqa: E731
    ns = _NativeNamespace(dict(nm.consts, **{fn: nm.entry(fn, fallback) for fn in nm.functions
                                             if nm.functions[fn]}), ref)
    mod = NumbaModule(name, source, ns, key, "disk", (time.perf_counter() - t0) * 1e3,
                      native=True, dtypes=dtypes)
    ref.append(mod)
    return mod


def _load_new(name: str, source: str, prepare, dtypes, key=None, native: bool = False) -> NumbaModule:
    """A disk hit, or (under the compile lock, so one process of several stores it) a new
    entry; numba compiles each entry point on its first call (or in `prepare`)."""
    listen_jit()
    key = cache_key(source) if key is None else key
    t0 = time.perf_counter()
    module = _imported(source, lambda: disk_cache.import_entry(key))   # None: a miss
    origin = "disk"
    if module is None:
        before = disk_cache.stamp(key)
        with disk_cache.compile_lock(key):
            published = disk_cache.stamp(key) not in (None, before)     # while we waited
            module = _imported(source, lambda: disk_cache.import_entry(key)) if published else None
            if module is None:
                dump_source(name, "numba", source)
                path = disk_cache.store_module(key, source_suffix=".py", kernel_names=[name],
                                               dtypes=list(dtypes))
                module = _imported(source, lambda: disk_cache.import_module(path, key), prepare)
                origin = "compiled"
                if prepare is not None:
                    disk_cache.seal_module(key, compile_ms=(time.perf_counter() - t0) * 1e3)
    return NumbaModule(name, source, module.__dict__, key, origin, (time.perf_counter() - t0) * 1e3,
                       native=native, dtypes=dtypes)


def _imported(source: str, load, prepare=None):
    """load() (a module or None), then prepare(its namespace); an error of either (numba's
    typing or lowering) is a CompileError showing the source."""
    try:
        module = load()
        if module is not None and prepare is not None:
            prepare(module.__dict__)
        return module
    except CompileError:
        raise
    except Exception as exc:
        raise CompileError("numba", f"{type(exc).__name__}: {exc}", source, numba_options()) from exc


# the algorithms' homes (_codegen/ops/<op>/): their fixed numba kernel files live there
_OPS = Path(order_keys.__file__).parent / "ops"


def kernel_files(*names: str) -> str:
    """The texts of the fixed kernel files `names` (paths under _codegen/ops/, as
    "sort/cpu_kernels.py"), each under a header line."""
    return "\n\n".join(f"# ---- {n} " + "-" * (88 - len(n)) + "\n" + (_OPS / n).read_text()
                       for n in names)


def stage_kernels_source(*more: str) -> str:
    """The stage kernels' module text: order_keys' numba spelling of the order bits
    (order_keys.NUMBA_SOURCE), ops/sort/cpu_kernels.py (sort, top-k, gather, distinct), then
    the kernel files named in `more` (group/cpu_kernels.py, join/cpu_kernels.py)."""
    return order_keys.NUMBA_SOURCE + "\n\n" + kernel_files("sort/cpu_kernels.py", *more)


# ---- numba's compiler time ------------------------------------------------------------------
# numba's compiler time, told apart from run time, and compiles that take long, logged.
#
# numba compiles an entry point (or loads it from its cache) on its first call with new
# argument types, inside the call: a trace row timing that call would show the compile as run
# time (seconds for a kernel that runs in a millisecond). Two listeners on numba's events,
# installed once with the first cpu module (`listen`):
#
# * "numba:compiler_lock" (held while numba compiles or loads from its cache): each thread's
#   spans of it, so `since(t0)` says how much of a call that began at perf_counter() t0 was
#   numba's compiler; the caller books that as compile time and the rest as run time.
# * "numba:compile" (a real compile): the entry point's name goes to log.compiling, which logs
#   a compile running longer than about a second, with how long so far, at INFO.

_clock = time.perf_counter
_local = threading.local()        # .depth, .t0, .spans: deque of (start, seconds)
_installed: list = []
_install_lock = threading.Lock()


def _state():
    s = _local.__dict__
    if "spans" not in s:
        _local.depth, _local.t0, _local.spans = 0, 0.0, deque(maxlen=64)
    return _local


def jit_ran_since(t0: float) -> bool:
    """Whether this thread entered numba's compiler (a compile or a cache load) since
    perf_counter() `t0`."""
    spans = getattr(_local, "spans", None)
    return bool(spans) and spans[-1][0] >= t0


def jit_ms_since(t0: float) -> float:
    """Milliseconds this thread spent in numba's compiler since perf_counter() `t0`."""
    spans = getattr(_local, "spans", None)
    if not spans:
        return 0.0
    return sum(seconds for start, seconds in spans if start >= t0) * 1e3


def listen_jit() -> None:
    """Install the listeners (once per process; numba must be importable)."""
    if _installed:
        return
    with _install_lock:
        if _installed:
            return
        from numba.core import event

        class CompilerTime(event.Listener):
            def on_start(self, ev):
                s = _state()
                if s.depth == 0:
                    s.t0 = _clock()
                s.depth += 1

            def on_end(self, ev):
                s = _state()
                s.depth = max(s.depth - 1, 0)
                if s.depth == 0:
                    s.spans.append((s.t0, _clock() - s.t0))

        class CompileProgress(event.Listener):
            def on_start(self, ev):
                log.compiling_begin(_name(ev))

            def on_end(self, ev):
                log.compiling_end()

        event.register("numba:compiler_lock", CompilerTime())
        event.register("numba:compile", CompileProgress())
        _installed.append(True)


def _name(ev) -> str | None:
    """The entry point numba compiles, when it is one of ours (None for the user's own
    numba functions, which log.compiling leaves alone)."""
    fn = getattr((ev.data or {}).get("dispatcher"), "py_func", None)
    module = getattr(fn, "__module__", "") or ""
    if not module.startswith("querycompute"):
        return None
    return f"numba entry point {fn.__name__}"
