"""Running a terminal operator: signature -> (fused plan, compiled kernel) -> results.

Three ways through, fastest first (warm.py holds the entries):
* hot: the Query ran this terminal before; the same columns, dtypes and lambda code objects
  go straight to the compiled pass (Prepared.run_quick), with no key built;
* warm: a signature tuple (code objects, dtypes, terminal, backend) finds the pass in a
  process-wide dict; only lambdas that capture values have their captures read;
* full: capture, translate, lower and compile (or load from the kernel cache).
Every way launches through windows.py where the terminal may stop early (any / all / first).
The trace of a hot call is built only when qc.last_trace() asks for it.
"""
from __future__ import annotations

import operator
import time

import numpy as np

from . import terminals as T
from . import windows
from .backends import registry
from .backends.base import Trace
from .cache import disk_cache
from .errors import BackendUnavailableError, QueryError, codegen_errors
from .fusion import Lowered
from .plan import lower, param_values, slot_info
from .sources import is_device_array
from .warm import FastEntry, Hot, plain_items, slot_sig

note_memory_hit = disk_cache.note_memory_hit
_clock = time.perf_counter
_dtype_of = operator.attrgetter("dtype")
_memo: dict[tuple, tuple] = {}          # full signature -> (Lowered, Prepared)
_fast: dict[tuple, FastEntry] = {}      # warm signature -> entry
# The last terminal's Trace, or what builds it: (backend, terminal, n, prepared, row, t0, t1).
_last: list = [Trace()]


class TerminalReq:
    """What the terminal operator asks for. `specs` holds (result key, AggSpec) pairs;
    `signature` is what of it changes the compiled pass (not defaults). `fns` are the
    lambdas the specs carry; a shared request (made once, reused by every call) carries
    T.PER_CALL instead and each call passes its own lambdas to `run`."""
    __slots__ = ("name", "specs", "standalone", "fns", "signature", "shared")

    def __init__(self, name: str, specs: tuple = (), standalone: bool = True, shared: bool = False):
        self.name = name
        self.specs = specs
        self.standalone = standalone
        self.shared = shared
        self.fns = tuple([s.fn for _, s in specs if s.fn is not None and s.fn is not T.PER_CALL])
        self.signature = (name, standalone,
                          tuple([(s.kind, s.fn is not None, type(s.seed), s.seed) for _, s in specs]))


# Shared requests: every terminal called without a default, with no function (PLAIN_REQUESTS)
# or with one given per call (FN_REQUESTS: q.count(lambda v: ...)). The warm path allocates none.
PLAIN_REQUESTS = {name: TerminalReq(name, shared=True) for name in ("to_array", "to_list")}
PLAIN_REQUESTS.update({name: TerminalReq(name, ((name, spec),), shared=True)
                       for name, spec in T.PLAIN.items()})
FN_REQUESTS = {name: TerminalReq(name, ((name, T.AggSpec(name, T.PER_CALL)),), shared=True)
               for name in T.PLAIN}


def run(q, term: TerminalReq, fns=None):
    """Execute `term` on query `q`; returns the user's value. `fns`: the terminal's lambdas
    for this call (a shared request carries none); by default the request's own."""
    t0 = _clock()
    if fns is None:
        fns = term.fns
    hot = q._hot
    if hot and hot.term is term:
        n = hot.length()
        if n >= 0 and hot.same_fns(fns) and (q._backend != "auto" or registry.auto_choice(n) == hot.name):
            fast = hot.fast
            infos = _captures(fast, q, fns) if fast.capture_slots else None
            if infos is not False:
                try:
                    params = param_values(hot.lowered, infos, q._source) if hot.lowered.bindings else ()
                    if hot.early is None:
                        raw, row = hot.prepared.run_quick(hot.items, params, n)
                    else:             # any / all / first: stop at the deciding window
                        raw, row = hot.early.launch(hot.prepared, hot.items, params, n)
                except Exception as exc:
                    return _failed(q, term, fns, hot.name, n, exc, t0)
                note_memory_hit()
                result = hot.finish(raw)
                _last[0] = (hot.name, term.name, n, hot.prepared, row, t0, _clock())
                return result
    return _run_full(q, term, fns, t0)


def _captures(fast: FastEntry, q, fns) -> list | bool:
    """The slot infos of the lambdas that capture values (others None), or False when a
    captured value changed type since `fast` was made (the pass must be looked up anew)."""
    slots = slot_functions(q, fns)
    infos = [None] * len(slots)
    for i in fast.capture_slots:
        infos[i] = slot_info(slots[i])
    return infos if fast.still_matches(infos) else False


def _run_full(q, term: TerminalReq, fns, t0: float):
    """Not hot: read the columns, build the warm signature, look it up; compile on a miss."""
    source = q._source
    cols = source.columns()
    n = len(cols[0]) if cols else source.length(cols)
    name = q._backend
    if name == "auto":
        on_device = False
        for c in cols:                # (a loop: a generator costs more on this path)
            if type(c) is not np.ndarray and is_device_array(c):
                on_device = True
        name = registry.choose_auto(n, on_device)
    codes = q._codes
    if fns:
        codes = codes + tuple([getattr(f, "__code__", f) for f in fns])
    fast_key = (name, source.kind, source.fields, q._kinds, term.signature,
                tuple(map(_dtype_of, cols)), codes)
    fast = _fast.get(fast_key)
    infos = None
    if fast is not None and fast.capture_slots:
        infos = _captures(fast, q, fns)
        if infos is False:
            fast = None               # a captured value changed type: take the full path
    if fast is None:
        trace = Trace(name, term.name, n)
        try:
            infos = [slot_info(fn) for fn in slot_functions(q, fns)]
            hit, origin, compile_ms = _compiled(name, source, cols, q, term, infos)
            fast = _fast[fast_key] = FastEntry(hit, infos, term, finisher(hit[0], term))
            result = _launch(hit, origin, compile_ms, source, cols, n, term, infos, trace)
        except Exception as exc:
            return _failed(q, term, fns, name, n, exc, t0)
        trace.total_ms = (_clock() - t0) * 1e3
        last = trace
    else:
        lowered, prepared = fast.hit
        try:
            params = param_values(lowered, infos, source) if lowered.bindings else ()
            raw, row = windows.launch(prepared, fast.early, cols, params, n)
        except Exception as exc:
            return _failed(q, term, fns, name, n, exc, t0)
        note_memory_hit()
        result = fast.finish(raw) if fast.finish_term is term else assemble(lowered, raw, term)
        last = (name, term.name, n, prepared, row, t0, _clock())
    if term.shared:
        if q._hot is None:
            q._hot = False            # ran once: a Hot entry from the second run on
        else:
            _remember(q, term, name, source, cols, codes[len(q._codes):], fast)
    _last[0] = last
    return result


def _remember(q, term: TerminalReq, name: str, source, cols: tuple, fn_codes: tuple,
              fast: FastEntry) -> None:
    """Make `q` hot for `term` (from its second run on: a query built and run once per call,
    the whole chain inline in a loop, never pays for the Hot entry)."""
    items = plain_items(source, cols)
    if items is not None:
        finish = fast.finish if fast.finish_term is term else finisher(fast.hit[0], term)
        q._hot = Hot(term, name, items, fn_codes, fast, finish,
                     lambda: source.length(()))


def _failed(q, term: TerminalReq, fns, name: str, n: int, exc: Exception, t0: float):
    """A run raised. Errors of the query itself, and failures of a backend the user pinned
    (or of cpu / numpy), propagate; a GPU backend `auto` chose is marked broken (warned once)
    and the query reruns on cpu, which the trace says. BackendUnavailableError is a QueryError
    that `auto` falls back from (e.g. a GPU newer/older than NVRTC can compile for)."""
    own_error = isinstance(exc, QueryError) and not isinstance(exc, BackendUnavailableError)
    if q._backend != "auto" or name in ("cpu", "numpy") or own_error:
        raise exc
    registry.mark_broken(name, f"{type(exc).__name__}: {exc}")
    trace = Trace("cpu", term.name, n,
                  fallback=f"{name} failed at run time ({type(exc).__name__}: {exc}); reran on cpu")
    source = q._source
    cols = source.columns()
    infos = [slot_info(fn) for fn in slot_functions(q, fns)]
    hit, origin, compile_ms = _compiled("cpu", source, cols, q, term, infos)
    result = _launch(hit, origin, compile_ms, source, cols, n, term, infos, trace)
    trace.total_ms = (_clock() - t0) * 1e3
    _last[0] = trace
    return result


def describe(q, term: TerminalReq, infos: list) -> str:
    """The chain as text, e.g. select(lambda v: v * 2).where(lambda v: v > 1000).sum(), for
    the kernel cache's metadata (what `querycompute cache list` shows)."""
    texts = [src.text for src, _ in infos]
    parts = [f"{kind}({texts[i]})" for i, (kind, _) in enumerate(q._ops)]
    fn_texts = iter(texts[len(q._ops):])
    args = ", ".join(f"{key}={spec.kind}" if not term.standalone else
                     (next(fn_texts) if spec.fn is not None else "") for key, spec in term.specs)
    return ".".join(parts + [f"{term.name}({args})"])


def slot_functions(q, fns) -> list:
    """Every lambda of the query, chain first, then the terminal's `fns`: the slots, in order."""
    return [fn for _, fn in q._ops] + list(fns)


def _compiled(name, source, cols, q, term, infos) -> tuple:
    """(hit = (Lowered, Prepared), origin, compile ms) by the full signature, which includes
    the capture types: from the memo, else lowered and prepared (compiled or from disk)."""
    dts = tuple(c.dtype for c in cols)
    sig = (name, source.kind, source.fields, dts, q._kinds, term.signature,
           tuple(slot_sig(*info) for info in infos))
    hit = _memo.get(sig)
    if hit is not None:
        note_memory_hit()
        return hit, "memory", 0.0
    backend = registry.require(name)
    lowered = lower(source, tuple(str(d) for d in dts), q._ops, term, infos)
    disk_cache.query_hint = describe(q, term, infos)
    try:
        with codegen_errors(name):
            prepared = backend.prepare(lowered.pass_)
    finally:
        disk_cache.query_hint = ""
    _memo[sig] = hit = (lowered, prepared)
    return hit, getattr(prepared, "origin", "compiled"), getattr(prepared, "compile_ms", 0.0)


def _launch(hit, origin, compile_ms, source, cols, n, term, infos, trace):
    lowered, prepared = hit
    params = param_values(lowered, infos, source) if lowered.bindings else ()
    raw, row = windows.launch(prepared, windows.early_exit(lowered), cols, params, n)
    # Backends that know better (a cpu entry point compiled on first use) fill these
    # themselves; otherwise one program holds every kernel of the pass, so its origin applies
    # to all and its build time is shown on the first.
    rows = windows.trace_rows(prepared, row)
    for i, k in enumerate(rows):
        if not k.cache:
            k.cache = origin
            k.compile_ms = compile_ms if i == 0 else 0.0
    trace.kernels.extend(rows)
    return assemble(lowered, raw, term)


def assemble(lowered: Lowered, raw, term: TerminalReq):
    """Raw backend results -> the user's value: aggregates via terminals.finish, arrays shaped
    like the element (array, tuple of arrays, dict of arrays; lists for to_list)."""
    if term.specs:
        if term.standalone:
            return T.finish(lowered.finishes[0], raw, term.specs[0][1], None)
        return {key: T.finish(f, raw, spec, key) for f, (key, spec) in zip(lowered.finishes, term.specs)}
    arrays = tuple(raw)
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


def finisher(lowered: Lowered, term: TerminalReq):
    """assemble() for this lowered pass and request, as a function of the raw results."""
    if term.specs and term.standalone:
        return T.finisher(lowered.finishes[0], term.specs[0][1])
    return lambda raw: assemble(lowered, raw, term)


def last_trace() -> Trace:
    """What the last terminal operator did (backend, kernels, cache origin, times, fallback)."""
    last = _last[0]
    if type(last) is tuple:           # a hot call: build its Trace now
        name, terminal, n, prepared, row, t0, t1 = last
        trace = Trace(name, terminal, n)
        trace.kernels = windows.trace_rows(prepared, row)
        for k in trace.kernels:
            k.cache = k.cache or "memory"
        trace.total_ms = (t1 - t0) * 1e3
        _last[0] = last = trace
    return last
