"""The `cpu` backend: runs a fused pass as numba-compiled Python (dialect "numba").

codegen.dialects.numba_py prints the pass as a Python module (numba_loader.module_source makes it importable
and cached by numba) with ONE entry point per step, over a range of chunks, without the GIL.
morsels.py runs it: one call on this thread for a small n, else morsels of a few chunks
handed dynamically to a pool of threads (DESIGN.md 5f). Every chunk is computed by one call
and partials combine in chunk order, so who ran what never changes a result's bits. Every
other cpu kernel runs the same way, through `_run_morsels`: the column operations' steps
(cpu_stages.py, cpu_group.py, cpu_join.py) and long rows (rows_numba.py, rows_columns.py);
no cpu kernel has a prange loop or a serial twin.

Disk cache (docs/cache.md): the module goes through the one numba loader (numba_loader.py):
written into its cache entry and imported from there, so numba keeps its compiled code
beside it and a new process loads that instead of compiling. A fresh module's entry points
are compiled in `prepare` (so errors and the compile time show there; a first big call
compiles nothing more); a new specialisation (a strided input) compiles, or loads from
numba's cache, on first use. Prepared.origin and each trace row say which happened.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Sequence

import numpy as np

from querycompute._codegen.dialects import numba_py
from querycompute._codegen.ops import compact as compact_op
from querycompute._codegen.ops import reduce as reduce_op
from querycompute._codegen.ir.program import Pass, Reduce

from querycompute._codegen.dialects import llvm_ir

from ... import config
from ...cache import disk_cache
from . import llvm_loader, morsels, numba_loader
from ..base import Backend, BackendCaps, KernelRun, Prepared
from .cpu_elements import bind

# "allowed": whether kernels may use more than the calling thread (a Dask worker's tasks
# run on one thread each: dask/run.py). The morsel pool needs no fork rule: a child starts
# its own (morsels._after_fork).
_parallel = {"allowed": True}


def _in_morsels(nch: int) -> int:
    """How many morsels a fused pass's step over nch chunks runs as (1: one call here)."""
    return morsels.morsels(nch) if _parallel["allowed"] else 1


def _run_morsels(fn, nch: int, args: tuple, stop=None) -> None:
    """fn(c0, c1, *args) over chunks [0, nch): morsels.run (with its early `stop` test), or
    one call where this process keeps to one thread (_parallel["allowed"])."""
    if _parallel["allowed"]:
        morsels.run(fn, nch, args, stop)
    else:
        fn(0, nch, *args)



# ---- launching a compiled pass ----------------------------------------------------------------
# The cpu backend's calls into a compiled pass: `Launch` runs a pass's entry points (one per
# step, each over a range of chunks) over the chunks of n elements through the morsel
# scheduler (morsels.py: one call on this thread for a small n, else morsels on the cores)
# with freshly allocated outputs; `agg_converters` turns a reduce's raw numba result into
# NumPy scalars of each aggregate's dtype.
# Below this many elements a pass is one chunk, run as one call on the caller's thread (the
# small reduce's fast path: CpuPrepared._small_reduce).
SERIAL_MAX = 32768


class Launch:
    """Runs a pass's entry points (dialects/numba_py.py): `call(n, inputs, params)` returns
    the raw result (outputs in storage dtypes). The method is chosen once here, so a warm
    call goes straight to numba."""

    def __init__(self, p: Pass, ns: dict):
        name = p.name
        self.pass_name = name
        self.dialect = ns.get("DIALECT", numba_py.NAME)        # the llvm route's module says so
        # inputs made contiguous first: a numba float sum (its lane order), every llvm step
        self.contiguous = ns.get(f"{name}_CONTIGUOUS", False)
        self.storage = tuple(np.dtype(numba_py.storage_dtype(d)) for d in p.program.output_dtypes)
        # a shaped result (ToArray.element = k): the outputs are the columns of one (n, k)
        # array, so the result needs no stacking copy (shaped.stack). numba compiles the
        # strided column views as its 'A' layout: one more specialisation, cached as any.
        self.element = getattr(p.terminal, "element", 0)
        if isinstance(p.terminal, Reduce):
            self.entry = ns[f"{name}_chunks"]
            self.partials = ns[f"{name}_PARTIALS"]          # per-chunk partials' dtypes
            self.one_chunk = ns[f"{name}_ONE_CHUNK"]        # an in-order fold: one chunk of n
            self.call, self.dispatchers = self._reduce, (self.entry,)
        elif p.program.has_filter:
            self.count, self.write = ns[f"{name}_count"], ns[f"{name}_write"]
            # few survivors: the writer that visits the count's keep bits (compact.SPARSE);
            # None where the module leaves it out (numba_scan_fused)
            self.sparse = ns.get(f"{name}_write_sparse")
            self.call = self._compact
            self.dispatchers = tuple(d for d in (self.count, self.write, self.sparse) if d is not None)
            self.window = p.window_params       # (lo, hi) positions in params, or None
        else:
            self.entry = ns[f"{name}_chunks"]
            self.call, self.dispatchers = self._dense, (self.entry,)
        # numba's per-dispatcher signature tables: they only grow, and only when a call
        # compiled or loaded a new specialisation, so their total size tells a warm call
        # (nothing new) from one that must report a compile or a load, at ~50 ns.
        # specialisations() -> how many signatures numba holds for these entry points.
        self._tables = tuple(d.overloads for d in self.dispatchers)
        self.specialisations = (self._tables[0].__len__ if len(self._tables) == 1
                                else self._two_tables)
        self.known = self.specialisations()
        self.misses = self.cache_misses()

    def chunks(self, n: int) -> int:
        """How many chunks the entry points visit for n elements."""
        if self.call == self._reduce and self.one_chunk:
            return min(n, 1)
        return -(-n // _CHUNK)

    def name(self, n: int) -> str:
        """The trace row's name: `<pass>_inline` (one call on the caller's thread) or
        `<pass>_morsels` (morsels on the pool's threads and the caller's)."""
        return f"{self.pass_name}_{'inline' if _in_morsels(self.chunks(n)) == 1 else 'morsels'}"

    def _two_tables(self) -> int:
        """specialisations() of a compaction: count and the writers each have a table."""
        return sum(len(t) for t in self._tables)

    def cache_misses(self) -> int:
        """How many times numba compiled these entry points rather than loading its cache."""
        return sum(sum(d.stats.cache_misses.values()) for d in self.dispatchers)

    def _reduce(self, n, inputs, params):
        nch = min(n, 1) if self.one_chunk else -(-n // _CHUNK)
        if self.contiguous:
            inputs = [np.ascontiguousarray(x) for x in inputs]
        parts = [np.empty(nch, t) for t in self.partials]
        entry = self.entry
        if _in_morsels(nch) == 1:       # all chunks and the combine in one call
            return entry(0, nch, nch, n, *parts, *inputs, *params)
        _run_morsels(entry, nch, (0, n, *parts, *inputs, *params))
        return entry(0, 0, nch, n, *parts, *inputs, *params)       # the combine alone

    def _outputs(self, n) -> tuple:
        """n fresh elements per output: separate arrays, or the columns of one (n, k) array."""
        k = self.element
        if not k:
            return tuple([np.empty(n, dt) for dt in self.storage])
        block = np.empty((n, k), self.storage[0])
        return tuple([block[:, j] for j in range(k)])

    def _dense(self, n, inputs, params):
        if self.contiguous:
            inputs = [np.ascontiguousarray(x) for x in inputs]
        outs = self._outputs(n)
        _run_morsels(self.entry, -(-n // _CHUNK), (n, *outs, *inputs, *params))
        return outs

    def _compact(self, n, inputs, params):
        if self.contiguous:
            inputs = [np.ascontiguousarray(x) for x in inputs]
        nch = -(-n // _CHUNK)
        bits = np.empty((n + 63) >> 6, np.uint64)
        offsets = np.zeros(nch + 1, np.int64)
        if _in_morsels(nch) == 1:       # count and prefix sum in one call
            self.count(0, nch, True, n, bits, offsets, *inputs, *params)
        else:
            _run_morsels(self.count, nch, (False, n, bits, offsets, *inputs, *params))
            self.count(nch, nch, True, n, bits, offsets, *inputs, *params)   # the prefix sum
        total = int(offsets[-1])
        if self.window is not None:       # only the survivors of the window [lo, hi)
            lo, hi = (int(params[k]) for k in self.window)
            if lo < 0 or hi < lo:
                raise ValueError(f"{self.pass_name}: compaction window [{lo}, {hi}) needs 0 <= lo <= hi")
            total = compact_op.window_total(total, lo, hi)
        outs = self._outputs(total)
        if self.sparse is not None and self.window is None and total * compact_op.SPARSE < n:
            _run_morsels(self.sparse, nch, (n, offsets, bits, *outs, *inputs, *params))
        else:
            _run_morsels(self.write, nch, (n, offsets, *outs, *inputs, *params))
        return outs

    def __call__(self, n, inputs, params):
        return self.call(n, inputs, params)


def agg_converters(aggs) -> tuple:
    """One function per Agg: (raw result tuple) -> that agg's value, as the engine expects
    it (numba boxes float32 as a Python float, so each sum/min/max/fold gets its numpy type
    back). Built once per pass so a warm run does no dtype lookups."""
    convs, j = [], 0
    for agg in aggs:
        if agg.op == "first":
            types = tuple(np.dtype(v.dtype).type for v in agg.values)

            def conv(raw, j=j, types=types):
                idx = int(raw[j])
                if idx < 0:
                    return (idx, ())
                return (idx, tuple(t(x) for t, x in zip(types, raw[j + 1:j + 1 + len(types)])))
        elif agg.op == "count":
            def conv(raw, j=j):
                return int(raw[j])
        elif agg.op in ("any", "all"):
            def conv(raw, j=j):
                return bool(raw[j])
        else:
            def conv(raw, j=j, t=np.dtype(agg.dtype).type):
                return t(raw[j])
        convs.append(conv)
        j += reduce_op.cpu_result_width(agg)
    return tuple(convs)


_clock = time.perf_counter
_CHUNK, _BLOCK = numba_py.CHUNK, (numba_py.CHUNK,)      # a trace row's grid and block


def _numba_version() -> str:
    """numba's version when it is imported already; else nothing (finding it costs ~20 ms).
    A numba the compile thread is importing right now is in sys.modules without its
    __version__ yet: nothing then, too."""
    version = getattr(sys.modules.get("numba"), "__version__", None)
    return f" {version}" if version is not None else ""


def route(p: Pass) -> str:
    """The dialect the cpu backend compiles pass p with: "llvm" (LLVM IR through llvmlite,
    _codegen/dialects/llvm_ir.py: a first call in well under a second) for every pass that
    dialect prints, unless QUERYCOMPUTE_CPU_LLVM=0 or llvmlite is older than 0.44; else
    "numba". Both give the same bits
    (the llvm dialect spells the numba dialect's semantics and sum order)."""
    if config.get("QUERYCOMPUTE_CPU_LLVM") and llvm_ir.unsupported(p) is None and llvm_loader.available():
        return "llvm"
    return "numba"


def _load(p: Pass) -> tuple[dict, Any, str, float]:
    """(namespace, cache key, origin, ms) for pass p: the llvm route's loader, or its module
    text through the one numba loader (numba_loader.load: memory, the disk cache, or stored
    and compiled now: then its entry points are compiled at once, so errors and the compile
    time show here)."""
    if route(p) == "llvm":
        return llvm_loader.load(p)
    mod = numba_loader.load(p.name, numba_loader.module_source(p), prepare=lambda ns: _compile_entries(p, ns),
                            dtypes=[s.dtype for s in p.program.inputs])
    return (mod.ns, mod.key, *mod.take_load_report())


def _compile_entries(p: Pass, ns: dict) -> None:
    """Compile the entry points for contiguous arrays by running them on n = 0 (the same
    entry points run every n: a first big call compiles nothing more)."""
    prog = p.program
    inputs = [np.empty(0, numba_py.storage_dtype(s.dtype)) for s in prog.inputs]
    arrays = numba_py.whole_arrays(p)
    if arrays:                        # shaped elements read whole (cpu_elements.py)
        inputs = bind(arrays, inputs)
    params = [np.zeros(1, s.dtype) if s.table else np.dtype(_param_type(s.dtype)).type(0)
              for s in prog.params]
    Launch(p, ns)(0, inputs, params)


def _param_type(dtype: str) -> str:
    return "float32" if dtype == "float16" else dtype     # float16 is held in float32


def param_args(specs, values) -> list:
    """Parameter values as the numba kernels take them: a scalar as its NumPy type (a Python
    number would make numba compile a float64 / int64 variant; float16 is held in float32),
    a table parameter (ParamSpec.table: a string function's values per distinct string) as
    the array it is."""
    return [v if s.table else np.dtype(_param_type(s.dtype)).type(v) for s, v in zip(specs, values)]


class CpuPrepared(Prepared):
    """One pass, compiled; `run` converts float16 storage and runs it (morsels.py decides
    whether that is one call on this thread or morsels on the cores).

    The warm path (the kernel ran before with these argument types) is a type
    check of the params, the numba call, the result conversion and one trace row; anything
    new (the first run, a specialisation numba had to compile or load) takes `_first_use`.
    """

    def __init__(self, p: Pass, ns: dict, key, origin: str, compile_ms: float):
        self.p = p
        self.origin = origin
        self.compile_ms = compile_ms
        self._key = key
        self._launch = Launch(p, ns)
        prog = p.program
        self._f16_inputs = tuple(k for k, s in enumerate(prog.inputs) if s.dtype == "float16")
        # arrays of shaped elements read whole: the numba dialect's choice (the llvm route
        # takes columns)
        self._whole = numba_py.whole_arrays(p) if self._launch.dialect == numba_py.NAME else ()
        # the scalar type each param must arrive as (float16 params travel as float32)
        self._param_types = tuple(np.ndarray if s.table else np.dtype(_param_type(s.dtype)).type
                                  for s in prog.params)
        self._f16_outputs = tuple(k for k, d in enumerate(prog.output_dtypes) if d == "float16")
        self._convs = (agg_converters(p.terminal.aggs) if isinstance(p.terminal, Reduce)
                       else None)
        self._ran = False

    def run_quick(self, inputs: Sequence[Any], params: Sequence[Any], n: int) -> tuple:
        t0 = _clock()
        if self._f16_inputs:      # numba has no CPU float16: pass the bits (a view, no copy)
            inputs = list(inputs)
            for k in self._f16_inputs:
                inputs[k] = np.asarray(inputs[k]).view(np.uint16)
        if self._whole:           # each array's component columns as one (n, m) argument
            inputs = bind(self._whole, inputs)
        if params and tuple(map(type, params)) != self._param_types:
            params = param_args(self.p.program.params, params)
        launch = self._launch
        convs = self._convs
        raw = launch.call(n, inputs, params)
        if convs is None:
            result = self._arrays(raw)
        elif len(convs) == 1:
            result = [convs[0](raw)]
        else:
            result = [c(raw) for c in convs]
        run_ms = (_clock() - t0) * 1e3
        if self._ran and launch.specialisations() == launch.known:
            return result, (launch, n, run_ms, "memory", 0.0)
        row = self._first_use(launch, n, run_ms, t0)
        if convs is not None and not self._f16_inputs and not self._param_types:
            self.run_quick = self._small_reduce()
        return result, row

    def _small_reduce(self):
        """run_quick for the case that decides small-n speed: a reduce without parameters or
        float16 inputs, on fewer than SERIAL_MAX elements (one chunk: one call on this
        thread), after its first run. What it reads is bound once (closure variables load
        faster than attributes); any other call, and one where numba had to add a
        specialisation, goes through the general method."""
        general = CpuPrepared.run_quick.__get__(self)
        launch = self._launch
        entry, specialisations = launch.entry, launch.specialisations
        partials, contiguous = launch.partials, launch.contiguous
        empty, ascontiguous = np.empty, np.ascontiguousarray
        convs = self._convs
        conv = convs[0] if len(convs) == 1 else (lambda raw: [c(raw) for c in convs])

        def small_reduce(inputs, params, n):
            if n >= SERIAL_MAX or params or not n:
                return general(inputs, params, n)
            t0 = _clock()
            if contiguous:
                inputs = [ascontiguous(x) for x in inputs]
            raw = entry(0, 1, 1, n, *[empty(1, t) for t in partials], *inputs)
            result = [conv(raw)] if len(convs) == 1 else conv(raw)
            run_ms = (_clock() - t0) * 1e3
            if specialisations() == launch.known:
                return result, (launch, n, run_ms, "memory", 0.0)
            return result, self._first_use(launch, n, run_ms, t0)
        return small_reduce

    def trace_rows(self, row: tuple) -> list[KernelRun]:
        """The one trace row of a run: (launch, n, run ms, cache origin, compile ms); its grid
        is the chunks, its name says whether they ran as one call or as morsels."""
        launch, n, run_ms, cache, compile_ms = row
        return [KernelRun(launch.name(n), launch.dialect, (launch.chunks(n),), _BLOCK, cache, compile_ms, run_ms)]

    def _first_use(self, launch: Launch, n: int, run_ms: float, t0: float) -> tuple:
        """The trace row of a run that is the Prepared's first, or that made numba compile
        an entry point or load it from numba's cache (its first strided input, say): numba's compiler time inside the
        call (numba_loader.jit_ms_since `t0`) is booked as compile time, not run time. Newly compiled
        code is sealed into the disk entry so the next process loads it."""
        cache, compile_ms = ("memory", 0.0) if self._ran else (self.origin, self.compile_ms)
        self._ran = True
        if launch.specialisations() == launch.known:
            return launch, n, run_ms, cache, compile_ms
        jit_ms = min(numba_loader.jit_ms_since(t0), run_ms)
        launch.known = launch.specialisations()
        misses = launch.cache_misses()
        compiled = misses > launch.misses
        launch.misses = misses
        if compiled:
            disk_cache.seal_module(self._key, compile_ms=jit_ms, new_compile=True)
        origin = "compiled" if compiled else "disk"
        return (launch, n, run_ms - jit_ms,
                "compiled" if "compiled" in (cache, origin) else origin, compile_ms + jit_ms)

    def _arrays(self, raw: tuple) -> tuple:
        """ToArray outputs in their dtypes: float16 ones arrive as uint16 bits."""
        if not self._f16_outputs:
            return raw
        out = list(raw)
        for k in self._f16_outputs:
            out[k] = out[k].view(np.float16)
        return tuple(out)


class CpuBackend(Backend):
    name = "cpu"
    dialect = "numba"
    # numba-compiled chunks on the host's cores; column operations of its own (cpu_stages.py);
    # a fold not provably associative runs in element order, chunk after chunk
    caps = BackendCaps(device="host", in_order_fold=True, lookup_tables=True, fast_loads=True,
                       tier_sums=True)

    def __init__(self):
        self._available: tuple[bool, str] | None = None

    def availability(self) -> tuple[bool, str]:
        """Whether numba is installed, found without importing it: importing numba takes
        0.2-0.4 s, which a first call answered by the numpy tier must not wait for (numba
        is imported by the compile, in the background). A numba that is installed but
        fails to import surfaces as that compile's error."""
        if self._available is None:
            import importlib.util
            from ...config import numba_jit_disabled
            from ..registry import NUMBA_JIT_OFF
            if "numba" not in sys.modules and importlib.util.find_spec("numba") is None:
                self._available = (False, "numba is not installed; install it with: "
                                          "pip install numba")
            elif numba_jit_disabled():                    # numba would compile nothing
                self._available = (False, NUMBA_JIT_OFF)
            else:
                self._available = (True, f"numba{_numba_version()} (LLVM JIT on this CPU)")
        return self._available

    def source(self, p: Pass) -> str:
        return llvm_loader.source(p) if route(p) == "llvm" else numba_loader.module_source(p)

    def launch_shape(self, p: Pass, n: int) -> list[dict]:
        chunks = max(1, -(-n // numba_py.CHUNK))
        kind = "inline" if _in_morsels(chunks) == 1 else "morsels"
        if route(p) == "llvm":
            compiler = "LLVM IR via llvmlite"
        else:
            why = llvm_ir.unsupported(p)
            compiler = f"numba: the llvm dialect does not print {why}" if why else "numba"
        return [{"name": f"{p.name}_{kind}", "grid": (chunks,), "block": (numba_py.CHUNK,),
                 "compiler": compiler}]

    def loads_fast(self, p: Pass) -> bool:
        """A pass on the llvm route whose object file is in the disk cache (llvm_loader.cached):
        loaded in a few ms, so the first call is the kernel's."""
        return route(p) == "llvm" and llvm_loader.cached(p)

    def prepare(self, p: Pass) -> Prepared:
        from .cpu_columns import wrap      # X.sum(axis=0) of scalarized rows: one row pass
        return wrap(p, lambda: CpuPrepared(p, *_load(p)))
