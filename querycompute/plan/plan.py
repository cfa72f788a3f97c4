"""From a Query to its fused plan: the lambdas' sources, the element the chain starts from,
the lowering of chain + terminal into one `Lowered` pass, and the kernel parameters' values.
Used by the engine on a cache miss (and for every call's parameters) and by introspect.
Also the in-order fold rule (refuse_parallel, at the end): which backends may run a plan
with a fold not provably associative.
"""
from __future__ import annotations

import math
from types import FunctionType
from typing import TYPE_CHECKING

import numpy as np

from querycompute._codegen.ir import expr as E
from querycompute._codegen.errors import HostOnly
from querycompute._codegen.pretty import fmt
from querycompute._codegen.ir.program import InputSpec, Reduce
from querycompute._codegen.ir.stage_specs import GroupSpec, ScanSpec

from ..errors import CapturedValueOverflowError, FoldOrderError, HostOnlyError, QueryError
from ..graph.graph import Count, JoinArg, ScanArg, slot_functions
from ..frontend.capture import LambdaSource, capture_values, lambda_source
from ..frontend.datetimes import loaded, storage
from ..frontend.shipped import Shipped
from ..frontend.exact import derived_value, is_derived
from ..frontend.strings import JOINED, Deferred, is_string_param, is_table_param, param_value as string_param
from ..frontend.shaped import ShapedVal
from ..frontend.values import RecordVal, Scalar, StrCodes, TupleVal

if TYPE_CHECKING:
    from .fusion import Lowered, Lowering
    from ..sources.sources import Source


# Stand-ins for the slots of operators without a lambda: reverse(), order_by() / distinct()
# without a key (NO_FUNCTION), and the n of take / skip / element_at (COUNT: read on every
# call, like a captured value, so its value is a kernel or run-time parameter).
NO_FUNCTION = LambdaSource((), None, "<none>", (), None, "")
COUNT = LambdaSource((), None, "<count>", ("n",), None, "n")
OTHER = LambdaSource((), None, "<other>", ("other",), None, "the other query")


def slot_info(fn) -> tuple:
    """(LambdaSource, current captured values) for a user function or a parsed text lambda;
    stand-ins for a missing key function and for take/skip counts."""
    t = type(fn)
    if t is Count:
        return COUNT, {"n": fn.value}
    if fn is None:
        return NO_FUNCTION, {}
    if t is ScanArg:
        fn = fn.fn
    if t is JoinArg:
        return OTHER, {"other": (fn.other, fn.key)}
    if t is ScanArg:
        t = type(fn)
    if t is Shipped:                          # a Dask chunk's function: text + captures
        return fn.source, fn.env
    if type(fn) is not FunctionType:          # text, parsed text, a ufunc / builtin: no captures
        from ..frontend.known_callables import function_source   # (np / math / builtins only)
        src = function_source(fn)
        return src, capture_values(None, src)
    src = lambda_source(fn)
    return src, capture_values(fn, src)


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
    if source.shapes:                  # shaped elements: several columns per input
        return shaped_element(source, dts)
    inputs = [InputSpec(_input_name(source, i), storage(d)) for i, d in enumerate(dts)]
    loads = [loaded(E.Load(i, storage(d)), d) for i, d in enumerate(dts)]
    strings = source._table.strings if source._table is not None else ()
    if strings:                        # a string column's codes (frontend/strings.py)
        loads = [StrCodes(s.expr, column=f) if f in strings else s
                 for f, s in zip(source.fields, loads)]
    if source.kind == "array":
        return loads[0], inputs
    if source.kind == "zip":
        return TupleVal(tuple(loads)), inputs
    return RecordVal(tuple(zip(source.fields, loads)), tuple(source.skipped.items())), inputs


def shaped_element(source, dts: tuple):
    """(element value, program inputs) for a source with shaped inputs."""
    inputs, values, k = [], [], 0
    for i, s in enumerate(source.shapes):
        base = _input_name(source, i)
        if not s:
            inputs.append(InputSpec(base, dts[k]))
            values.append(Scalar(E.Load(k, dts[k]), None))
            k += 1
            continue
        arr = np.empty(s, object)
        m = math.prod(s)
        for j, idx in enumerate(np.ndindex(s)):      # (element: the GPU may read it whole)
            inputs.append(InputSpec(f"{base}_{'_'.join(map(str, idx))}", dts[k], (base, j, m)))
            arr[idx] = Scalar(E.Load(k, dts[k]), None)
            k += 1
        values.append(ShapedVal(arr))
    if source.kind == "array":
        return values[0], inputs
    if source.kind == "zip":
        return TupleVal(tuple(values)), inputs
    return RecordVal(tuple(zip(source.fields, values))), inputs


def lower(source: Source, dts: tuple, ops: tuple, term, infos: list, sides=None) -> Lowered:
    """Fuse source + chain + terminal into one pass (no compilation). (The translator and
    the fusion are imported here, on the first compile, not with the package.) `sides`: what
    runs a join's other side, a sub-plan, for its schema (the engine's run(chain, terminal));
    a chain with a join needs it."""
    from ..graph.graph import staged
    if source.shapes:
        from . import rows
        if rows.has_long(source):      # rows of more than shaped.MAX_SCALARS values
            return rows.lower(source, dts, ops, term, infos)
    if staged(tuple([type(op) for op in ops]), term):
        from ..sources.shaped import refuse_staged
        refuse_staged(source, ops, term)
        from .stages import lower_staged
        return lower_staged(source, dts, ops, term, infos, sides)
    from .fusion import Lowering
    lw = Lowering(infos, f"qc_{term.name}")   # kernel names: qc_sum_reduce_partials, ...
    element, inputs = initial_element(source, dts, lw)
    element = lw.chain(element, tuple((op.kind, i) for i, op in enumerate(ops)))
    lowered = lw.terminal(inputs, element, term, len(ops))
    if lowered.shape == "shaped":      # the final (m, *s) array: one block (shaped.py)
        from ..sources.shaped import as_block
        lowered = as_block(lowered)
    return lowered


def lower_query(q, term, sides=None) -> tuple:
    """(Lowered, columns, infos) of query `q` with Terminal `term`: its source's columns
    read, its functions' sources captured, its chain planned (introspect's explain/source,
    the Dask fold rule; `sides`: lower's)."""
    cols = q._source.columns()
    dts = q._source.dtypes(cols)
    infos = [slot_info(fn) for fn in slot_functions(q._ops, term.fns)]
    return lower(q._source, dts, q.nodes(), term, infos, sides), cols, infos


def call_dictionaries(source: Source, params: list) -> dict:
    """This call's string dictionaries: a table's own (its columns' and the joins'), or, over
    a source without string columns, one dict per call that the joins fill (the same for
    every join of the plan: the first one already in `params`). param_values binds it; the
    results decode with it (engine.decoded, over the call's whole `params`)."""
    if source._table is not None:
        return source._table.dictionaries
    first = next((p for p in params if type(p) is dict), None)
    return {} if first is None else first


def param_values(lowered: Lowered, infos: list, source: Source) -> list:
    out = []
    for key, limits in zip(lowered.bindings, lowered.limits):
        where, name, dtype = key
        if where == "window":          # a compaction window: set per run (pipeline.py)
            out.append(np.int64(0))
            continue
        if where == "dictionaries":     # this call's string dictionaries, which a join
            out.append(call_dictionaries(source, out))  # adds the other side's to (join_plan)
            continue
        if dtype == "object":           # a join's other side: (Query, key function)
            out.append(infos[where][1][name])
            continue
        if is_string_param(name):       # a string's code in this call's dictionary
            env = None if infos is None or infos[where] is None else infos[where][1]   # (constants)
            d = call_dictionaries(source, out)
            out.append(Deferred(name, d, env) if JOINED in name[2] else string_param(name, d, env))
            continue
        if is_derived(name):            # a weak sub-expression of captured ints, exact
            src = infos[where][0]
            out.append(derived_value(name, dtype, infos[where][1], src.where(src.body), src.text))
            continue
        v = source.range_args[name] if where == "range" else infos[where][1][name]
        if limits is not None and type(v) is int and not limits[0] <= v <= limits[1]:
            src = infos[where][0]
            raise CapturedValueOverflowError(
                f"{src.where(src.body)}: captured {name!r} = {v} is out of bounds for "
                f"{limits[2]}, the type it meets in `{src.text}` (NumPy 2 raises "
                f"OverflowError here); use a value in [{limits[0]}, {limits[1]}] "
                f"or make the element wider first, e.g. np.int64(v)")
        try:
            out.append(np.dtype(dtype).type(v))
        except (OverflowError, ValueError, TypeError) as exc:
            raise QueryError(f"captured value {name!r} = {v!r} does not fit the parameter type "
                             f"{dtype} it was compiled for ({exc})") from None
    return out


# ---- the in-order fold rule ------------------------------------------------------------------
# The in-order fold rule's refusals (DESIGN section 3, `aggregate`): a fold whose function
# the compiler cannot prove associative (_codegen/associative.py) and the user did not state
# `associative=True` is an `in_order` Agg / GroupAgg / ScanSpec. The numpy and cpu backends
# run it sequentially in element order; the GPU dialects have only parallel trees, so the
# engine refuses it there before compiling (`refuse_parallel`, reading BackendCaps.in_order_fold; `auto` then runs on cpu), and
# Dask refuses it (partials.FoldRule: chunk partials cannot be combined).
def in_order_folds(lowered) -> list:
    """The combine expressions of the in-order folds of a plan (plan.lower's result)."""
    out = []
    terminal = getattr(getattr(lowered, "pass_", None), "terminal", None)
    if isinstance(terminal, Reduce):
        out += [a.combine for a in terminal.aggs if a.op == "fold" and a.in_order]
    for stage in getattr(lowered, "stages", ()) if getattr(lowered, "staged", False) else ():
        inner = getattr(stage, "lowered", None)
        if inner is not None:
            out += in_order_folds(inner)
        spec = getattr(stage, "spec", None)
        if isinstance(spec, ScanSpec) and spec.in_order:
            out.append(spec.combine)
        elif isinstance(spec, GroupSpec):
            out += [a.combine for a in spec.aggs if a.op == "fold" and a.in_order]
    return out


def fold_message(combine, where: str) -> str:
    """Why `where` refuses the fold whose combine is `combine`, and what to do."""
    return (f"{where}: the fold function (acc, item) -> {fmt(combine)} is not provably associative "
            f"(proved: + * min max & | ^, keep last / first, and compositions of them), so a "
            f"parallel fold could change its result; if it is associative, say so with "
            f"associative=True (aggregate(func, seed, associative=True), scan(...), "
            f"qc.aggregate(...)), else run it in element order with .on(\"cpu\")")


def refuse_parallel(backend: str, caps, lowered) -> None:
    """FoldOrderError when `backend` (its BackendCaps `caps`) folds in parallel only and the
    plan has an in-order fold."""
    if caps.in_order_fold:
        return
    folds = in_order_folds(lowered)
    if folds:
        raise FoldOrderError(fold_message(folds[0], f"backend {backend!r}"))


def refuse_tables(backend: str, caps, lowered) -> None:
    """HostOnlyError when `backend` (its BackendCaps `caps`) reads no table parameters and the
    plan has a string function (frontend/strings.py: its values per distinct string)."""
    if caps.lookup_tables or not any(is_table_param(key[1]) for key in lowered.bindings):
        return
    raise HostOnlyError(f"backend {backend!r}: {HostOnly(backend)}")
