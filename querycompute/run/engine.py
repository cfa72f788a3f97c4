"""Running a terminal: a Query's signature -> its Compiled entry (plan + kernels) -> results.

    q.sum()  -> run(q, Terminal)
             -> hot:  the Query ran this terminal before (warm.Hot): its columns, dtypes and
                      lambdas' code objects are checked, no key is built
             -> memo: the warm signature (backend, code objects, dtypes, terminal) finds a
                      warm.FastEntry; only lambdas that capture values have them read
             -> miss: plan (capture, translate, fuse: plan.py) and compile or load from disk
                      (the backend's prepare); with tiered execution the numpy tier answers
                      while the kernel compiles in the background (tiers.py)
             -> Compiled.launch (windows.py: any/all/first stop early) -> finisher -> value

One memo (memo.Memo, bounded) holds the FastEntries and the Compiled entries; a signature
compiles once however many threads ask (locks.KeyedLocks); both belong to the process's
Runtime (runtime.py). The trace of a call is per thread
and built only when asked for (qc.last_trace(), CompiledQuery.trace).
"""
from __future__ import annotations

import operator
import threading
import time
from dataclasses import replace
from logging import DEBUG

from typing import TYPE_CHECKING

import numpy as np

from .. import after_fork, config
from . import streaming, tiers
from ..graph import terminals as T
from ..backends import registry
from ..backends.base import KernelRun, Trace
from ..cache import disk_cache
from ..plan.column_use import narrowed
from .compiled import Compiled, Unusable
from ..errors import BackendUnavailableError, FoldOrderError, HostOnlyError, QueryError, codegen_errors
from ..graph.graph import Terminal, heavy, slot_functions
from ..log import compiling, logger
from .runtime import RUNTIME
from ..plan.plan import call_dictionaries, lower, param_values, refuse_parallel, refuse_tables, slot_info
from ..sources.sources import is_device_array
from ..sources.string_columns import decode
from ..frontend.datetimes import refuse_times, viewed
from .warm import FastEntry, Hot, plain_items, slot_sig
from .windows import trace_rows

if TYPE_CHECKING:
    from ..plan.fusion import Lowered

note_memory_hit = disk_cache.note_memory_hit
_clock = time.perf_counter
_dtype_of = operator.attrgetter("dtype")
# The memo and the compile locks belong to the process's Runtime (runtime.py); the names
# here are the same objects, read on every call.
_memo = RUNTIME.memo
_compiling = RUNTIME.compiling


class _LastCall(threading.local):
    """Per thread: the last terminal's Trace, or the tuple it is built from when asked
    (backend, terminal, n, tier, prepared, row, t0, t1): a warm call stores only that."""
    def __init__(self):
        self.value = Trace()


_last = _LastCall()


def _after_fork() -> None:
    """In a forked child: GPU entries can't launch; compiles the parent's background thread
    had not finished are submitted again in the child by their next call (tiers.Pending
    .after_fork); locks start afresh."""
    RUNTIME.after_fork()
    for key, entry in _memo.items():
        compiled = getattr(entry, "compiled", entry)
        if compiled.backend in registry.NOT_FORK_SAFE and not registry.availability(compiled.backend)[0]:
            # its driver's threads did not survive the fork: launching would hang
            why = registry.availability(compiled.backend)[1]
            compiled.prepared, compiled.pending = Unusable(BackendUnavailableError(why)), None
            compiled.direct = False
            _memo.discard(key)
        elif compiled.pending is not None:
            compiled.pending.after_fork()


after_fork.register(_after_fork)


def run(q, term: Terminal, fns=None, tiered: bool | None = None, keep_hot: bool = False):
    """Execute `term` on query `q`; returns the user's value. `fns`: the terminal's lambdas
    for this call (a shared terminal carries none); by default the terminal's own. `tiered`:
    None follows QUERYCOMPUTE_TIERED. `keep_hot`: remember this terminal on the Query even
    though it is not a shared one (a CompiledQuery holds its terminal for good)."""
    t0 = _clock()
    if fns is None:
        fns = term.fns
    if q._source._table is not None:          # a DataFrame / Arrow table: only the columns
        q = narrowed(q, term, fns)            # its lambdas read (column_use.py)
    hot = q._hot
    if hot and hot.term is term:
        n = hot.length()
        if n >= 0 and hot.same_fns(fns) and (
                q._backend != "auto" or registry.auto_choice(n, heavy(q._kinds)) == hot.name):
            fast = hot.fast
            infos = _captures(fast, q, fns) if fast.capture_slots else None
            if infos is not False:
                compiled = fast.compiled
                try:
                    params = param_values(compiled.lowered, infos, q._source) if compiled.has_params else ()
                    if compiled.direct:
                        prepared = compiled.prepared
                        raw, row = prepared.run_quick(hot.items, params, n)
                    else:
                        raw, row, prepared = compiled.launch(hot.items, params, n)
                except Exception as exc:
                    return _failed(q, term, fns, hot.name, n, exc, t0)
                note_memory_hit()
                result = hot.finish(raw)
                _last.value = (hot.name, term.name, n, compiled.tier, prepared, row, t0, _clock())
                return result
    return _run_full(q, term, fns, t0, tiered, keep_hot)


def _captures(fast: FastEntry, q, fns) -> list | bool:
    """The slot infos of the lambdas that capture values (others None), or False when a
    captured value changed type since `fast` was made (the pass must be looked up anew)."""
    slots = slot_functions(q._ops, fns)
    infos = [None] * len(slots)
    for i in fast.capture_slots:
        infos[i] = slot_info(slots[i])
    return infos if fast.still_matches(infos) else False


def _backend_for(q, cols, n: int) -> str:
    name = q._backend
    if name == "auto":
        on_device = False
        for c in cols:                # (a loop: a generator costs more on this path)
            if type(c) is not np.ndarray and is_device_array(c):
                on_device = True
        name = registry.choose_auto(n, on_device, heavy(q._kinds), q._source.times is not None)
    return name


def run_side(chain, term: Terminal, rows: list | None = None):
    """A sub-plan: a join's other side (plan/join_plan.py builds it as a graph.Chain), run
    with a shared terminal (to_array, or CODED: its strings left as codes). The planner asks
    for its schema (on zero rows), the executor (pipeline.StagedPrepared) for its columns; it
    runs as any chain does (its own memo entry, its own tier). The executor passes its call's
    trace `rows`: the sub-plan's kernels join them, named `side <name>` (what the side
    compiled and ran shows in the caller's qc.last_trace())."""
    result = run(chain, term, ())
    if rows is not None:
        side = last_trace()
        rows.extend(replace(k, name=f"side {k.name}") for k in side.kernels)
    return result


def _warm_key(q, term: Terminal, fns, name: str, cols) -> tuple:
    """The warm signature: backend, source shape, the chain's node classes and code objects (of
    the terminal's functions too), the terminal, the column dtypes. Written for speed: a chain
    written inline in a loop pays for it on every call (the one-column, one-function cases
    skip the generic tuple building)."""
    source = q._source
    codes = q._codes
    if fns:
        if len(fns) == 1:
            f = fns[0]
            codes = codes + (getattr(f, "__code__", f),)
        else:
            codes = codes + tuple([getattr(f, "__code__", f) for f in fns])
    dts = (cols[0].dtype,) if len(cols) == 1 else tuple(map(_dtype_of, cols))
    table = source._table             # (a string column reads as int32 codes: named here)
    return (name, source.kind, source.fields, source.shapes, q._kinds, term.signature, dts, codes,
            source.times, table.strings if table is not None else ())


def _lookup(q, term: Terminal, fns, name: str, cols, tiered) -> tuple:
    """(FastEntry, slot infos or None, fresh: (origin, compile ms) when this call planned or
    compiled, else None) for the query's warm signature."""
    fast_key = _warm_key(q, term, fns, name, cols)
    fast = _memo.get(fast_key)
    infos = None
    if fast is not None and fast.capture_slots:
        infos = _captures(fast, q, fns)
        if infos is False:
            fast = None               # a captured value changed type: find its own entry
    if fast is not None:
        return fast, infos, None
    source = q._source
    infos = [slot_info(fn) for fn in slot_functions(q._ops, fns)]
    compiled, origin, compile_ms = _compiled(name, source, cols, q, term, infos, tiered)
    fast = FastEntry(compiled, infos, term, finisher(compiled.lowered, term))
    _memo.put(fast_key, fast, replace=True)   # the captures' newest types are the likeliest
    return fast, infos, (origin, compile_ms)


_STREAMS: dict = {}          # backend name -> its BackendCaps.streams (read once)


def _streams(name: str) -> bool:
    s = _STREAMS.get(name)
    if s is None:
        s = _STREAMS[name] = registry.get(name).caps.streams
    return s


def _run_full(q, term: Terminal, fns, t0: float, tiered, keep_hot: bool):
    """Not hot: read the columns, find the entry by signature (compiling on a miss), launch."""
    source = q._source
    if source.runs_elsewhere:                     # Dask: one pass per chunk, combined by Dask
        return source.run_terminal(q, term, fns)
    cols = source.columns()
    n = len(cols[0]) if cols else source.length(cols)
    name = q._backend
    if name == "auto":
        name = _backend_for(q, cols, n)
    # a backend that streams (BackendCaps.streams: opencl, cuda), larger than the budget
    if _streams(name) and streaming.wanted(q, term, name, cols, n):
        try:                                      # (QUERYCOMPUTE_DEVICE_MEMORY)
            return streaming.run(q, term, fns, name, cols, n, t0, _clock)
        except Exception as exc:
            return _failed(q, term, fns, name, n, exc, t0)
    try:
        fast, infos, fresh = _lookup(q, term, fns, name, cols, tiered)
        compiled = fast.compiled
        params = param_values(compiled.lowered, infos, source) if compiled.has_params else ()
        if compiled.direct:
            prepared = compiled.prepared
            raw, row = prepared.run_quick(cols, params, n)
        else:
            raw, row, prepared = compiled.launch(cols, params, n)
        raw = decoded(raw, compiled.lowered, source, params, term.codes)
    except Exception as exc:
        return _failed(q, term, fns, name, n, exc, t0)
    result = fast.finish(raw) if fast.finish_term is term else assemble(compiled.lowered, raw, term)
    if compiled.pending is not None and compiled.pending.future is None:
        compiled.pending.start()      # the numpy tier has answered: now compile the kernel
    if fresh is None:
        note_memory_hit()
        _last.value = (name, term.name, n, compiled.tier, prepared, row, t0, _clock())
    else:
        trace = Trace(name, term.name, n)
        trace.tier = compiled.tier
        trace.kernels.extend(_fresh_rows(prepared, row, *fresh))
        trace.total_ms = (_clock() - t0) * 1e3
        _last.value = trace
    if term.shared or keep_hot:
        if q._hot is None and not keep_hot:
            q._hot = False            # ran once: a Hot entry from the second run on
        else:
            _remember(q, term, name, source, cols, fns, fast)
    return result


def _fresh_rows(prepared, row, origin: str, compile_ms: float) -> list:
    """Trace rows of a call that planned or compiled. Backends that know better (a cpu entry
    point compiled on first use) fill `cache` themselves; otherwise one program holds every
    kernel of the pass, so its origin applies to all and its build time shows on the first."""
    rows = trace_rows(prepared, row)
    for i, k in enumerate(rows):
        if not k.cache:
            k.cache = origin
            k.compile_ms = compile_ms if i == 0 else 0.0
    return rows


def _remember(q, term: Terminal, name: str, source, cols: tuple, fns, fast: FastEntry) -> None:
    """Make `q` hot for `term` (from its second run on: a query built and run once per call,
    the whole chain inline in a loop, never pays for the Hot entry)."""
    items = plain_items(source, cols)
    if items is not None and not getattr(fast.compiled.lowered, "strings", ()):   # (no decoding there)
        fn_codes = tuple([getattr(f, "__code__", f) for f in fns])
        finish = fast.finish if fast.finish_term is term else finisher(fast.compiled.lowered, term)
        q._hot = Hot(term, name, items, fn_codes, fast, finish, lambda: source.length(()))


def _failed(q, term: Terminal, fns, name: str, n: int, exc: Exception, t0: float):
    """A run raised. Errors of the query itself, and failures of a backend the user pinned
    (or of one whose kernels run off the GPU, BackendCaps.device: cpu / numpy), propagate; a
    GPU backend `auto` chose is marked broken (warned once) and the query reruns on cpu, which
    the trace says. BackendUnavailableError is a QueryError
    that `auto` falls back from (e.g. a GPU newer/older than NVRTC can compile for); so is a
    FoldOrderError (a fold only the cpu runs in element order), without marking the GPU broken."""
    in_order = isinstance(exc, FoldOrderError)
    host_only = isinstance(exc, HostOnlyError)
    own_error = isinstance(exc, QueryError) and not isinstance(
        exc, (BackendUnavailableError, FoldOrderError, HostOnlyError))
    if q._backend != "auto" or registry.get(name).caps.device != "gpu" or own_error:
        raise exc
    if in_order:
        why = f"{name} folds in parallel only and the fold is not provably associative; ran on cpu in element order"
    elif host_only:
        why = f"{name} kernels don't read string functions' tables (values per distinct string); ran on cpu"
    else:
        registry.mark_broken(name, f"{type(exc).__name__}: {exc}")
        why = f"{name} failed at run time ({type(exc).__name__}: {exc}); reran on cpu"
    trace = Trace("cpu", term.name, n, fallback=why)
    source = q._source
    cols = source.columns()
    infos = [slot_info(fn) for fn in slot_functions(q._ops, fns)]
    compiled, origin, compile_ms = _compiled("cpu", source, cols, q, term, infos, False)
    params = param_values(compiled.lowered, infos, source) if compiled.lowered.bindings else ()
    raw, row, prepared = compiled.launch(cols, params, n)
    raw = decoded(raw, compiled.lowered, source, params, term.codes)
    trace.kernels.extend(_fresh_rows(prepared, row, origin, compile_ms))
    trace.total_ms = (_clock() - t0) * 1e3
    _last.value = trace
    return assemble(compiled.lowered, raw, term)


def decoded(raw, lowered, source, params, codes: bool = False):
    """raw with the string columns' codes decoded (a table's string columns, a join's);
    `codes` (Terminal.codes): kept as Encoded codes with their dictionaries."""
    strings = getattr(lowered, "strings", ())
    if not strings:
        return raw
    return decode(raw, strings, call_dictionaries(source, params),
                  getattr(lowered, "assemble", None) is not None, codes)


def describe(q, term: Terminal, infos: list) -> str:
    """The chain as text, e.g. select(lambda v: v * 2).where(lambda v: v > 1000).sum(), for
    the kernel cache's metadata (what `querycompute cache list` shows)."""
    texts = [src.text for src, _ in infos]
    parts = [f"{op.kind}({texts[i]})" for i, op in enumerate(q.nodes())]
    fn_texts = iter(texts[len(q._ops):])
    args = ", ".join(f"{key}={spec.kind}" if not term.standalone else
                     (next(fn_texts) if spec.fn is not None else "") for key, spec in term.specs)
    return ".".join(parts + [f"{term.name}({args})"])


def _compiled(name, source, cols, q, term, infos, tiered) -> tuple:
    """(Compiled, origin, compile ms) by the full signature, which includes the capture
    types: from the memo, else planned and compiled (or loaded from disk) once, however many
    threads ask. Tiered (the default unless QUERYCOMPUTE_TIERED=0 or tiered=False): a backend
    other than numpy starts on the numpy tier and compiles in the background."""
    dts = tuple(c.dtype for c in cols)
    table = source._table             # (a string column reads as int32 codes: named here)
    sig = ("plan", name, source.kind, source.fields, source.shapes, dts, q._kinds, term.signature,
           tuple(slot_sig(*info) for info in infos), q._codes, source.times,   # (_codes: a scan's seed)
           table.strings if table is not None else ())
    hit = _memo.get(sig)
    if hit is not None:
        if logger.isEnabledFor(DEBUG):
            logger.debug("%s plan found in memory (tier: %s)", name, hit.tier)
        return hit, "memory", 0.0
    with _compiling.hold(sig):            # one thread compiles a signature; others wait
        hit = _memo.get(sig)
        if hit is not None:
            return hit, "memory", 0.0
        config.check_all()                # bad environment values: warned here, once
        if tiered is None:
            tiered = tiers.enabled_by_default()
        tiered = tiered and registry.get(name).caps.device != "reference"   # (numpy: no tier ahead)
        # tiered: the compiler is imported when the background compile starts, not here
        registry.check(name) if tiered else registry.require(name)
        lowered = lower(source, source.dtypes(cols), q.nodes(), term, infos, run_side)
        refuse_parallel(name, registry.get(name).caps, lowered)   # a fold only cpu / numpy run in order
        refuse_times(name, registry.get(name).caps, source)        # dates are int64 ticks
        refuse_tables(name, registry.get(name).caps, lowered)     # string functions: host only
        text = describe(q, term, infos)
        differs = tiers.differs(lowered, name) if tiered else None
        if differs:                       # the numpy tier would answer with other bits
            logger.info("tier: %s waits for the %s kernel: %s", text, name, differs)
        disk_hit = not differs and tiered and _loads_fast(name, lowered)
        if disk_hit:                      # loaded before answering, nothing compiled
            logger.info("tier: %s loads the %s kernel from the disk cache", text, name)
            tiered = False
        if tiered and not differs:
            split = tiers.splittable(lowered)
            pending = tiers.Pending(lambda: _prepare(registry.require(name), lowered, text),
                                    f"the {name} kernel for {text}",
                                    lambda: registry.load_compiler(name),
                                    tiers.NUMPY_TIER_MAX_HEAVY if heavy(q._kinds) else
                                    float("inf") if split else tiers.NUMPY_TIER_MAX_UNSPLIT)
            compiled = Compiled(name, lowered, _prepare(registry.get("numpy"), lowered, text), pending, split)
            logger.info("tier: numpy answers %s while the %s kernel compiles", text, name)
        else:
            if not disk_hit:              # (a disk hit imported what it needs: _loads_fast)
                registry.load_compiler(name)
            compiled = Compiled(name, lowered, _prepare(registry.require(name), lowered, text))
        _memo.put(sig, compiled)
    return compiled, compiled.origin, compiled.compile_ms


def _loads_fast(name: str, lowered: Lowered) -> bool:
    """A one-pass plan whose kernel the backend would load from the disk cache in a few ms
    (asked of a backend declaring `fast_loads`, with what the load needs imported first:
    the import lock's rule, registry.load_for_disk_hit)."""
    backend = registry.get(name)
    if (not backend.caps.fast_loads or getattr(lowered, "row_plan", None) is not None
            or getattr(lowered, "staged", False)):
        return False
    registry.load_for_disk_hit(name)
    return backend.loads_fast(lowered.pass_)


def _prepare(backend, lowered: Lowered, text: str):
    """The backend's compiled pass (compiled, or loaded from the disk cache); logged (log.py)
    with its duration and origin."""
    disk_cache.query_hint = text
    logger.debug("compile start: %s kernel for %s", backend.name, text)
    t0 = _clock()
    try:
        with codegen_errors(backend.name), compiling(f"the {backend.name} kernel for {text}"):
            if getattr(lowered, "row_plan", None) is not None:   # long rows (rows.py)
                from . import pipeline
                prepared = lowered.row_plan.prepare(backend.name, pipeline.stage_runtime)
            elif getattr(lowered, "staged", False):      # a plan of stages (stages.py)
                from . import pipeline
                from ..plan.group_narrow import for_backend     # no 64-bit types (webgpu)
                lowered = for_backend(lowered, backend)
                prepared = pipeline.prepare(lowered, backend.name, lambda one: backend.prepare(one.pass_))
            else:
                prepared = backend.prepare(lowered.pass_)
    except Exception as exc:
        logger.info("compile failed: %s kernel for %s after %.1f ms (%s)", backend.name, text,
                    (_clock() - t0) * 1e3, type(exc).__name__)
        raise
    finally:
        disk_cache.query_hint = ""
    logger.info("compile end: %s kernel for %s in %.1f ms (origin: %s)", backend.name, text,
                (_clock() - t0) * 1e3, getattr(prepared, "origin", "compiled"))
    return prepared


def compile_entry(q, term: Terminal, fns, tiered) -> Compiled:
    """The Compiled entry `q.compile(...)` binds: found or compiled for the query's current
    columns and captured values' types, without running it."""
    cols = q._source.columns()
    n = len(cols[0]) if cols else q._source.length(cols)
    name = _backend_for(q, cols, n)
    fast, _, _ = _lookup(q, term, fns, name, cols, tiered)
    return fast.compiled


def assemble(lowered: Lowered, raw, term: Terminal):
    """Raw backend results -> the user's value: aggregates via terminals.finish, arrays shaped
    like the element (array, tuple of arrays, dict of arrays; lists for to_list)."""
    own = getattr(lowered, "assemble", None)
    if own is not None:                 # a staged plan's own result (group_by's dict)
        return own(raw)
    if term.specs:
        if term.standalone:
            return T.finish(lowered.finishes[0], raw, term.specs[0][1], None)
        return {key: T.finish(f, raw, spec, key) for f, (key, spec) in zip(lowered.finishes, term.specs)}
    arrays = viewed(tuple(raw), getattr(lowered, "times", ()))
    if lowered.shape == "shaped":           # (m, *s) from the element's columns (shaped.py)
        from ..sources.shaped import stack
        out = stack(arrays, lowered.fields)
        return out.tolist() if term.name == "to_list" else out
    if lowered.shape == "parts":            # tuples / records with shaped items
        return T.join_parts(arrays, lowered.fields, to_list=term.name == "to_list")
    if term.name == "to_list":
        lists = [a.tolist() for a in arrays]
        if lowered.shape == "scalar":
            return lists[0]
        if lowered.shape == "tuple":
            return list(zip(*lists))
        return [dict(zip(lowered.fields, row)) for row in zip(*lists)]
    if lowered.shape == "scalar":
        return arrays[0]
    if lowered.shape == "tuple":
        return arrays
    return dict(zip(lowered.fields, arrays))


def finisher(lowered: Lowered, term: Terminal):
    """assemble() for this lowered pass and request, as a function of the raw results."""
    if getattr(lowered, "assemble", None) is not None:
        return lowered.assemble
    if term.specs and term.standalone:
        return T.finisher(lowered.finishes[0], term.specs[0][1])
    return lambda raw: assemble(lowered, raw, term)


def last_record():
    """This thread's last call, as stored (a Trace, or the tuple a Trace is built from)."""
    return _last.value


def build_trace(last) -> Trace:
    """A Trace from what a call stored (see _LastCall)."""
    if type(last) is not tuple:
        return last
    name, terminal, n, tier, prepared, row, t0, t1 = last
    trace = Trace(name, terminal, n)
    trace.tier = tier
    trace.kernels = trace_rows(prepared, row)
    for k in trace.kernels:
        k.cache = k.cache or "memory"
    trace.total_ms = (t1 - t0) * 1e3
    return trace


def last_trace() -> Trace:
    """What this thread's last terminal operator did (backend, tier, kernels, cache origin,
    times, fallback)."""
    last = _last.value
    if type(last) is tuple:           # a warm call: build its Trace now
        _last.value = last = build_trace(last)
    return last


def combine_traces(parts: list, terminal: str) -> Trace:
    """One call that ran as several terminal runs (count_distinct inside agg:
    api/count_distinct.py), as this thread's last trace: `parts` holds (label, Trace) in run
    order; each kernel row is named with its part's label, so the trace says what ran."""
    first = parts[0][1]
    backends = list(dict.fromkeys(t.backend for _, t in parts))
    trace = Trace("+".join(backends), terminal, first.n,
                  "; ".join(f"{label}: {t.fallback}" for label, t in parts if t.fallback) or None)
    trace.tier = "kernel" if all(t.tier == "kernel" for _, t in parts) else "numpy"
    for label, t in parts:
        for k in t.kernels:
            trace.kernels.append(KernelRun(f"{label}:{k.name}", k.dialect, k.grid, k.block,
                                           k.cache, k.compile_ms, k.run_ms))
        trace.total_ms += t.total_ms
        trace.chunks = max(trace.chunks, t.chunks)
    _last.value = trace
    return trace


def set_memo_size(entries: int) -> None:
    """Bound the in-memory memo of compiled queries (default QUERYCOMPUTE_MEMO_SIZE or 2048)."""
    _memo.resize(entries)
