"""Running a terminal operator: signature -> (fused plan, compiled kernel) -> results.

The warm path is: read the source's columns, read each lambda's captured values, build a
signature tuple (code objects, capture types, dtypes, terminal, backend), one dict lookup,
launch. Parsing, translating, lowering and compiling happen only on a miss.
"""
from __future__ import annotations

import numpy as np

from codegen import expr as E
from codegen.program import InputSpec

from . import terminals as T
from .backends import registry
from .backends.base import Trace, now_ms
from .cache import disk_cache
from .errors import QueryError, codegen_errors
from .frontend import (LambdaSource, RecordVal, Scalar, TupleVal, capture_key, capture_values,
                       lambda_source)
from .fusion import Lowered, Lowering
from .sources import Source, is_device_array

note_memory_hit = disk_cache.note_memory_hit
_memo: dict[tuple, tuple] = {}
_last: list[Trace] = [Trace()]


class TerminalReq:
    """What the terminal operator asks for. `specs` holds (result key, AggSpec) pairs;
    `signature` is what of it changes the compiled pass (not defaults)."""
    __slots__ = ("name", "specs", "standalone", "fns", "signature")

    def __init__(self, name: str, specs: tuple = (), standalone: bool = True):
        self.name = name
        self.specs = specs
        self.standalone = standalone
        self.fns = [s.fn for _, s in specs if s.fn is not None]
        self.signature = (name, standalone,
                          tuple([(s.kind, s.fn is not None, type(s.seed), s.seed) for _, s in specs]))


# The request of every terminal called without function or default, made once.
PLAIN_REQUESTS = {name: TerminalReq(name) for name in ("to_array", "to_list")}
PLAIN_REQUESTS.update({name: TerminalReq(name, ((name, spec),)) for name, spec in T.PLAIN.items()})


def slot_info(fn) -> tuple:
    """(LambdaSource, current captured values) for a user function or a parsed text lambda."""
    if isinstance(fn, LambdaSource):          # parsed from CLI text: np / math / builtins only
        return fn, capture_values(None, fn)
    if not callable(fn):
        raise TypeError(f"expected a function (a lambda), got {type(fn).__name__}")
    src = lambda_source(fn)
    return src, capture_values(fn, src)


def _slot_sig(src, env) -> tuple:
    """What a lambda's IR depends on: its code and the types (not values) of its captures."""
    if src.code is None:
        return (src,)
    return (src.code,) + capture_key(env)


def _input_name(source: Source, i: int) -> str:
    """Kernel-facing input names: the table's field names where they are plain ASCII
    identifiers (printers prefix them, so C keywords are safe), else x / in0, in1, ..."""
    if source.kind == "table":
        f = source.fields[i]
        if f.isascii() and f.isidentifier() and not f.startswith("_"):
            return f
    return "x" if source.kind == "array" else f"in{i}"


def initial_element(source: Source, dts: tuple, lw: Lowering):
    """The element value the first lambda sees, and the program's inputs."""
    if source.kind == "range":
        start = lw.b.param(("range", 0), "int64")
        step = lw.b.param(("range", 2), "int64")
        idx = E.Binary("add", start, E.Binary("mul", E.Index(), step, "int64"), "int64")
        return Scalar(idx, None), []
    inputs = [InputSpec(_input_name(source, i), d) for i, d in enumerate(dts)]
    loads = [Scalar(E.Load(i, d), None) for i, d in enumerate(dts)]
    if source.kind == "array":
        return loads[0], inputs
    if source.kind == "zip":
        return TupleVal(tuple(loads)), inputs
    return RecordVal(tuple(zip(source.fields, loads))), inputs


def lower(source: Source, dts: tuple, ops: tuple, term: TerminalReq, infos: list) -> Lowered:
    """Fuse source + chain + terminal into one pass (no compilation)."""
    lw = Lowering(infos, f"qc_{term.name}")   # kernel names: qc_sum_reduce_partials, ...
    element, inputs = initial_element(source, dts, lw)
    element = lw.chain(element, tuple((kind, i) for i, (kind, _) in enumerate(ops)))
    if term.name in ("to_array", "to_list"):
        return lw.to_array(inputs, element)
    slot = len(ops)
    specs = []
    for _, spec in term.specs:
        if spec.fn is not None:
            specs.append((spec, slot))
            slot += 1
        else:
            specs.append((spec, None))
    return lw.reduce(inputs, element, specs, term.standalone)


def param_values(lowered: Lowered, infos: list, source: Source) -> list:
    out = []
    for key, limits in zip(lowered.bindings, lowered.limits):
        where, name, dtype = key
        v = source.range_args[name] if where == "range" else infos[where][1][name]
        if limits is not None and type(v) is int and not limits[0] <= v <= limits[1]:
            src = infos[where][0]
            raise QueryError(f"{src.where(src.body)}: captured {name!r} = {v} is out of bounds for "
                             f"{limits[2]}, the type it meets in `{src.text}` (NumPy 2 raises "
                             f"OverflowError here); use a value in [{limits[0]}, {limits[1]}] "
                             f"or make the element wider first, e.g. np.int64(v)")
        try:
            out.append(np.dtype(dtype).type(v))
        except (OverflowError, ValueError, TypeError) as exc:
            raise QueryError(f"captured value {name!r} = {v!r} does not fit the parameter type "
                             f"{dtype} it was compiled for ({exc})") from None
    return out


class _Fast:
    """A warm entry: what a repeat of the same chain needs, found without translating."""
    __slots__ = ("hit", "capture_slots", "capture_sig", "captured")

    def __init__(self, hit, infos):
        self.hit = hit
        self.capture_slots = tuple(i for i, (src, _) in enumerate(infos) if src.captures)
        self.capture_sig = tuple(_slot_sig(*infos[i]) for i in self.capture_slots)
        # The captured objects themselves: when every one is still the very same object
        # (a module like np, a function, an unchanged value), the types are too.
        self.captured = tuple(tuple(infos[i][1].values()) for i in self.capture_slots)

    def still_matches(self, infos) -> bool:
        for k, i in enumerate(self.capture_slots):
            now = tuple(infos[i][1].values())
            if any(a is not b for a, b in zip(now, self.captured[k])) and \
                    _slot_sig(*infos[i]) != self.capture_sig[k]:
                return False
        return True


_fast: dict[tuple, _Fast] = {}


def run(q, term: TerminalReq):
    """Execute `term` on query `q`; returns the user's value."""
    t0 = now_ms()
    source = q._source
    cols = source.columns()
    n = len(cols[0]) if cols else source.length(cols)
    name = q._backend
    if name == "auto":
        name = registry.choose_auto(n, any(type(c) is not np.ndarray and is_device_array(c) for c in cols))
    trace = Trace(name, term.name, n)
    # Warm path: the chain's code objects (not its lambdas, which are new objects on every
    # call) plus dtypes and terminal identify the compiled pass; only lambdas that capture
    # values need their captures read, to check the types and bind the parameters.
    codes = q._codes
    if term.fns:
        codes = codes + tuple([getattr(f, "__code__", f) for f in term.fns])
    fast_key = (name, source.kind, source.fields, q._kinds, term.signature,
                tuple([c.dtype for c in cols]), codes)
    fast = _fast.get(fast_key)
    infos = None
    if fast is not None and fast.capture_slots:
        fns = slot_functions(q, term)
        infos = [None] * len(fns)
        for i in fast.capture_slots:
            infos[i] = slot_info(fns[i])
        if not fast.still_matches(infos):
            fast = None               # a captured value changed type: take the full path
    try:
        if fast is not None:
            note_memory_hit()
            result = _launch(fast.hit, "memory", 0.0, source, cols, n, term, infos, trace)
        else:
            infos = [slot_info(fn) for fn in slot_functions(q, term)]
            result = _execute(name, source, cols, n, q, term, infos, trace, fast_key)
    except Exception as exc:
        if q._backend != "auto" or name in ("cpu", "numpy") or isinstance(exc, QueryError):
            raise
        registry.mark_broken(name, f"{type(exc).__name__}: {exc}")
        trace = Trace("cpu", term.name, n,
                      fallback=f"{name} failed at run time ({type(exc).__name__}: {exc}); reran on cpu")
        infos = [slot_info(fn) for fn in slot_functions(q, term)]
        result = _execute("cpu", source, cols, n, q, term, infos, trace, None)
    trace.total_ms = now_ms() - t0
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


def slot_functions(q, term: TerminalReq) -> list:
    """Every lambda of the query, chain first, then the terminal's: the slots, in order."""
    return [fn for _, fn in q._ops] + term.fns


def _execute(name, source, cols, n, q, term, infos, trace, fast_key):
    """The full path: signature with capture types -> memo; translate and compile on a miss."""
    dts = tuple(c.dtype for c in cols)
    sig = (name, source.kind, source.fields, dts, q._kinds, term.signature,
           tuple(_slot_sig(*info) for info in infos))
    hit = _memo.get(sig)
    if hit is None:
        backend = registry.require(name)
        lowered = lower(source, tuple(str(d) for d in dts), q._ops, term, infos)
        disk_cache.query_hint = describe(q, term, infos)
        try:
            with codegen_errors(name):
                prepared = backend.prepare(lowered.pass_)
        finally:
            disk_cache.query_hint = ""
        _memo[sig] = hit = (lowered, prepared)
        origin, compile_ms = getattr(prepared, "origin", "compiled"), getattr(prepared, "compile_ms", 0.0)
    else:
        note_memory_hit()
        origin, compile_ms = "memory", 0.0
    if fast_key is not None:
        _fast[fast_key] = _Fast(hit, infos)
    return _launch(hit, origin, compile_ms, source, cols, n, term, infos, trace)


def _launch(hit, origin, compile_ms, source, cols, n, term, infos, trace):
    lowered, prepared = hit
    params = param_values(lowered, infos, source) if lowered.bindings else ()
    raw = prepared.run(cols, params, n, trace)
    # Backends that know better (a cpu entry point compiled on first use) fill these
    # themselves; otherwise one program holds every kernel of the pass, so its origin applies
    # to all and its build time is shown on the first.
    for i, k in enumerate(trace.kernels):
        if not k.cache:
            k.cache = origin
            k.compile_ms = compile_ms if i == 0 else 0.0
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


def last_trace() -> Trace:
    """What the last terminal operator did (backend, kernels, cache origin, times, fallback)."""
    return _last[0]
