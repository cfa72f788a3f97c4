"""Fuse a query chain into one pass: the source, every select/where and the terminal become a
single `codegen.program.Pass` (one ElementProgram + one Terminal).

Each lambda is translated (frontend) with the element value of the step before it; the
results of every select are bound to locals (`Let`) so later lambdas refer to them instead of
copying expression trees; a where becomes a `Filter`. Terminal functions (sum(f), count(pred),
agg specs) are translated the same way after the chain. Captured scalars become kernel
parameters; `Lowered.bindings` records where each parameter's value is read on every run.
"""
from __future__ import annotations

from dataclasses import dataclass

from querycompute._codegen import dtypes
from querycompute._codegen.ir import expr as E
from querycompute._codegen.associative import provably_associative
from querycompute._codegen.ir.program import Agg, ElementProgram, Filter, Let, ParamSpec, Pass, Reduce, ToArray

from ..graph import terminals as T
from ..errors import QueryError, UnsupportedLambdaError, UnsupportedTypeError
from ..frontend import RecordVal, Scalar, TupleVal, translate
from ..frontend.strings import is_table_param
from ..frontend.values import StrCodes
from ..frontend.datetimes import isnat, times_of, weaken
from ..frontend.shaped import ShapedVal, map_items


@dataclass(frozen=True)
class Lowered:
    pass_: Pass
    bindings: tuple        # per program param: (slot, capture name, dtype) or ("range", i, dtype)
    shape: str             # element shape for to_array: "scalar" | "tuple" | "record"
    fields: tuple          # record field names / tuple arity placeholder
    finishes: tuple        # per terminal spec: terminals.Finish
    steps: tuple = ()      # per chain operator: (kind, element bytes, element type after it)
    limits: tuple = ()     # per program param: (lo, hi, dtype) it must fit when it is a
                           # Python int (NumPy 2 raises OverflowError there), or None
    strings: tuple = ()    # (output column, string column) per output holding string codes,
                           # decoded with this call's dictionary (string_columns.decode)
    times: tuple = ()      # to_array: per output, its datetime64/timedelta64 type or None
                           # (the kernel stores int64 ticks; frontend/datetimes.py); () if none

    @property
    def stages(self) -> tuple:
        """The stage plan: (stage op, Pass) per stage, in order. Every chain of selects and
        wheres fuses with its terminal into one stage today; pipeline breakers (sort, scan,
        group_by, join) will end a stage and start the next."""
        return ((self.pass_.stage_op, self.pass_),)


def _all_exprs(p: Pass):
    prog = p.program
    roots = [st.expr if isinstance(st, Let) else st.cond for st in prog.body] + list(prog.outputs)
    if isinstance(p.terminal, Reduce):
        for a in p.terminal.aggs:
            roots += list(a.values) + ([a.combine] if a.combine is not None else [])
    for r in roots:
        yield from E.walk(r)


def param_limits(p: Pass) -> tuple:
    """Where an int64 (or, from 2**63 up, uint64) parameter is cast to another integer type,
    a Python int captured for it must be in that type's range: NumPy 2 refuses
    `int8_value + 300` (OverflowError), and so do we, at launch, rather than wrap silently."""
    bounds: dict[str, tuple] = {}
    for e in _all_exprs(p):
        if isinstance(e, E.Cast) and isinstance(e.x, E.Param) and e.x.dtype in ("int64", "uint64") \
                and dtypes.is_int(e.dtype) and e.dtype != e.x.dtype:
            lo, hi = dtypes.int_limits(e.dtype)
            old = bounds.get(e.x.name, (lo, hi, e.dtype))
            bounds[e.x.name] = (max(lo, old[0]), min(hi, old[1]), e.dtype if hi <= old[1] else old[2])
    return tuple(bounds.get(ps.name) for ps in p.program.params)


def _where(src) -> str:
    node = src.body
    return f"{src.filename}:{node.lineno}:{node.col_offset + 1}"


class _Builder:
    def __init__(self):
        self.body: list = []
        self.params: list[ParamSpec] = []
        self.bindings: list = []
        self._param_index: dict = {}
        self._locals = 0

    def param(self, key, dtype: str) -> E.Param:
        if key not in self._param_index:
            p = E.Param(f"p{len(self.params)}", dtype)
            self._param_index[key] = p
            self.params.append(ParamSpec(p.name, dtype, origin="range" if key[0] == "range" else "",
                                         table=is_table_param(key[1])))
            self.bindings.append(key + (dtype,))
        return self._param_index[key]

    def bind(self, v):
        """Give every non-trivial scalar of a value a local, so later steps share it."""
        if isinstance(v, Scalar):
            if isinstance(v.expr, (E.Var, E.Const, E.Param, E.Load, E.Index)):
                return v
            name = f"v{self._locals}"
            self._locals += 1
            self.body.append(Let(name, v.expr))
            if type(v) is StrCodes:    # (a string column picked by a condition stays one)
                return StrCodes(E.Var(name, v.expr.dtype), column=v.column)
            return Scalar(E.Var(name, v.expr.dtype), v.weak, time=v.time)
        if isinstance(v, TupleVal):
            return TupleVal(tuple(self.bind(i) for i in v.items))
        if isinstance(v, ShapedVal):
            return map_items(v, self.bind)
        return RecordVal(tuple((k, self.bind(i)) for k, i in v.fields), v.skipped)


def _unpack(element, src) -> tuple:
    k = len(src.params)
    if k == 1:
        return (element,)
    items = None
    if isinstance(element, TupleVal):
        items = element.items
    elif isinstance(element, RecordVal):
        items = tuple(v for _, v in element.fields)
    if isinstance(element, ShapedVal):
        raise UnsupportedLambdaError(
            f"the lambda takes {k} parameters but each element is one array of shape "
            f"{element.shape}; take one parameter and index it (r[0], r[1])", where=_where(src),
            construct="arity")
    if items is None or len(items) != k:
        have = "single values" if isinstance(element, Scalar) else f"{len(items)}-tuples"
        raise UnsupportedLambdaError(
            f"the lambda takes {k} parameters but the elements are {have}; "
            f"take one parameter, or select a {k}-tuple first", where=_where(src), construct="arity")
    return items


def leaves(v) -> tuple[str, tuple, tuple]:
    """(shape, field names, scalar leaves) of an element value (a shaped one: its element
    shape as the fields, its entries in C order)."""
    if isinstance(v, ShapedVal):
        return "shaped", v.shape, tuple(v.items.flat)
    if isinstance(v, Scalar):
        return "scalar", (), (v,)
    if isinstance(v, TupleVal):
        if not all(isinstance(i, Scalar) for i in v.items):
            return _parts("tuple", tuple(range(len(v.items))), v.items)
        return "tuple", (), v.items
    if not all(isinstance(i, Scalar) for _, i in v.fields):
        return _parts("record", tuple(k for k, _ in v.fields), tuple(i for _, i in v.fields))
    return "record", tuple(k for k, _ in v.fields), tuple(i for _, i in v.fields)


def string_leaves(items) -> tuple:
    """(leaf index, string column) of the leaves that are a string column's codes."""
    return tuple((i, s.column) for i, s in enumerate(items) if type(s) is StrCodes)


def refuse_strings(value, what: str) -> None:
    """An aggregate over a string column's codes would compute on numbers: refused."""
    if not isinstance(value, (Scalar, TupleVal, RecordVal)):
        return
    found = string_leaves(leaves(value)[2] if not isinstance(value, Scalar) else (value,))
    if found:
        raise UnsupportedTypeError(f"{what} over string column {found[0][1]!r}: aggregates compute on "
                         f"numbers, and a string column is read as codes; to_array(), to_list(), "
                         f"to_pandas(), group_by / order_by / distinct keys and the string tests of "
                         f"a where read it (its first row in order: .order_by(key).take(1).to_list()); "
                         f"to compute on a categorical column's codes, read them as numbers first "
                         f"(pandas .cat.codes, polars .to_physical(), Arrow .indices)")


def key_leaves(v) -> tuple:
    """The scalar leaves of a sort or distinct key, nested tuples / records flattened in
    order: comparing them in turn is comparing the nested key item by item (so a key
    `(k(r), f(r))` whose f returns a tuple keys on every scalar of it)."""
    if isinstance(v, TupleVal):
        return tuple(s for i in v.items for s in key_leaves(i))
    if isinstance(v, RecordVal):
        return tuple(s for _, i in v.fields for s in key_leaves(i))
    return leaves(v)[2]


def _parts(kind: str, names: tuple, items: tuple) -> tuple[str, tuple, tuple]:
    """A tuple / record with shaped items (a zip or table with (n, *s) inputs): shape
    "parts", fields (kind, ((name, item shape or ()), ...)), the items' scalars in order (a
    shaped one's in C order); graph/terminals.join_parts puts them together again."""
    spec, flat = [], []
    for name, item in zip(names, items):
        if isinstance(item, ShapedVal):
            spec.append((name, tuple(item.shape)))
            flat += list(item.items.flat)
        elif isinstance(item, Scalar):
            spec.append((name, ()))
            flat.append(item)
        else:
            raise QueryError("nested tuples/records can't be stored as columns; flatten them in select")
    return "parts", (kind, tuple(spec)), tuple(flat)


def early_ops(lowered) -> tuple | None:
    """The aggregates' ops of a lowered pass that may stop before its end (every aggregate
    any / all / first: run/windows.py runs it window by window until decided), else None
    (to_array, and any reduce with a sum, count, min, max or fold: those read everything;
    min/max over bools are all/any plus a count, so they read everything too)."""
    if getattr(lowered, "staged", False):
        return None               # a staged plan's reductions stop early inside (pipeline.py)
    aggs = getattr(lowered.pass_.terminal, "aggs", None)
    if not aggs or any(a.op not in ("any", "all", "first") for a in aggs):
        return None
    return tuple(a.op for a in aggs)


def element_type(v) -> str:
    """An element value's type as text: float32, (float32, int64), {price: float32, ...}."""
    if isinstance(v, Scalar):
        return v.expr.dtype
    if isinstance(v, ShapedVal):
        return f"{v.dtype}[{', '.join(map(str, v.shape))}]"
    if isinstance(v, TupleVal):
        return "(" + ", ".join(element_type(i) for i in v.items) + ")"
    return "{" + ", ".join(f"{k}: {element_type(i)}" for k, i in v.fields) + "}"


def pick_one(v) -> str:
    """A lambda that picks one value of an element, for messages: `lambda r: r.price` for a
    record (a record is indexed by name, not position), `lambda r: r[0]` otherwise."""
    if isinstance(v, RecordVal) and v.fields:
        name = v.fields[0][0]
        return f"lambda r: r.{name}" if name.isidentifier() else f"lambda r: r[{name!r}]"
    if isinstance(v, ShapedVal):
        return f"lambda r: r[{', '.join('0' * len(v.shape))}]"
    return "lambda r: r[0]"


def _bytes(v) -> int:
    """Bytes an element value would take in memory."""
    if isinstance(v, Scalar):
        return dtypes.itemsize(v.expr.dtype)
    if isinstance(v, ShapedVal):
        return sum(dtypes.itemsize(s.dtype) for s in v.items.flat)
    items = v.items if isinstance(v, TupleVal) else tuple(i for _, i in v.fields)
    return sum(_bytes(i) for i in items)


def _scalar(v, src, what: str) -> Scalar:
    if not isinstance(v, Scalar):
        raise UnsupportedLambdaError(f"{what} must return a single value, not a tuple or record",
                                     where=_where(src), construct=what)
    if type(v) is StrCodes:
        raise UnsupportedLambdaError(f"{what} returns string column {v.column!r}, not a bool; "
                                     f"test it: r.{v.column} != \"\"", where=_where(src), construct=what)
    return v


def _truthy(s: Scalar) -> E.Expr:
    return s.expr if s.expr.dtype == "bool" else E.Cast(s.expr, "bool")


def _const(v, dtype: str) -> E.Const:
    """A seed as a literal of the accumulator type (checked: it must be representable)."""
    import numpy as np
    conv = np.dtype(dtype).type(v)
    if conv != v and not (v != v):
        raise QueryError(f"aggregate seed {v!r} is not representable as {dtype}")
    py = bool(conv) if dtype == "bool" else (float(conv) if conv.dtype.kind == "f" else int(conv))
    return E.Const(py, dtype)


def _cast(e: E.Expr, dtype: str) -> E.Expr:
    return e if e.dtype == dtype else E.Cast(e, dtype)


class Lowering:
    """One use: lower(source element, chain ops, terminal) -> Lowered."""

    def __init__(self, slots: list, name: str):
        self.slots = slots          # [(LambdaSource, env)] in slot order
        self.b = _Builder()
        self.name = name
        self.steps: list = []

    def call(self, slot: int, args: tuple):
        src, env = self.slots[slot]
        return translate(src, args, env, lambda nm, dt: self.b.param((slot, nm), dt))

    def apply(self, slot: int, element):
        src, _ = self.slots[slot]
        return self.call(slot, _unpack(element, src))

    def chain(self, element, ops: tuple):
        """ops: (kind, slot) pairs for select/where."""
        for kind, slot in ops:
            src = self.slots[slot][0]
            if kind == "select":
                element = self.b.bind(self.apply(slot, element))
            else:
                self.b.body.append(Filter(_truthy(_scalar(self.apply(slot, element), src, "where predicate"))))
            self.steps.append((kind, _bytes(element), element_type(element)))
        return element

    def program(self, inputs, outputs) -> ElementProgram:
        return ElementProgram(tuple(inputs), tuple(self.b.params), tuple(self.b.body), tuple(outputs))

    def to_array(self, inputs, element, window: bool = False) -> Lowered:
        """window (a pass with a filter): the survivors of ranks [lo, hi) only, lo and hi two
        int64 parameters bound to ("window", 0 / 1), set per run (a take / skip after it)."""
        shape, fields, items = leaves(element)
        bounds = None
        if window:
            bounds = (self.b.param(("window", 0), "int64").name, self.b.param(("window", 1), "int64").name)
        prog = self.program(inputs, [s.expr for s in items])
        p = Pass(prog, ToArray(bounds), self.name)
        return Lowered(p, tuple(self.b.bindings), shape, fields, (), tuple(self.steps), param_limits(p),
                       string_leaves(items), times_of(items))

    def terminal(self, inputs, element, term, slot: int) -> Lowered:
        """The terminal `term` over `element`: to_array / to_list, or its aggregates, whose
        functions take the slots from `slot` on."""
        if term.name in ("to_array", "to_list"):
            return self.to_array(inputs, element)
        specs = []
        for _, spec in term.specs:
            if spec.fn is not None:
                specs.append((spec, slot))
                slot += 1
            else:
                specs.append((spec, None))
        return self.reduce(inputs, element, specs, term.standalone)

    def reduce(self, inputs, element, specs: list, standalone: bool) -> Lowered:
        """specs: [(AggSpec, slot or None)]. A standalone count/first predicate becomes a Filter."""
        aggs: list[Agg] = []
        count_index = -1
        finishes = []

        def need_count() -> int:
            nonlocal count_index
            if count_index < 0:
                count_index = len(aggs)
                aggs.append(Agg("count", (), "int64"))
            return count_index

        if standalone and specs[0][0].kind in ("count", "first") and specs[0][1] is not None:
            spec, slot = specs[0]
            src = self.slots[slot][0]
            self.b.body.append(Filter(_truthy(_scalar(self.apply(slot, element), src, "predicate"))))
            specs = [(spec, None)]
        for spec, slot in specs:
            value = element if slot is None or spec.kind == "fold" else self.apply(slot, element)
            finishes.append(self._agg(spec, slot, value, aggs, need_count))
        prog = self.program(inputs, [])
        p = Pass(prog, Reduce(tuple(aggs)), self.name)
        return Lowered(p, tuple(self.b.bindings), "scalar", (), tuple(finishes), tuple(self.steps),
                       param_limits(p))

    def _agg(self, spec, slot, value, aggs: list, need_count) -> T.Finish:
        kind = spec.kind
        if not (kind == "count" and slot is None):
            refuse_strings(value, f"{kind}()")
        src = self.slots[slot][0] if slot is not None else None
        here = len(aggs)
        if kind == "count":
            if slot is None:
                return T.Finish("count", need_count())
            cond = _truthy(_scalar(value, src, "count predicate"))
            aggs.append(Agg("sum", (E.Cast(cond, "int64"),), "int64"))
            return T.Finish("count", here)
        if kind in ("any", "all"):
            if slot is None and isinstance(value, ShapedVal):   # X.any(axis=0), like sum()
                return T.ShapedFinish(tuple(self._agg(spec, slot, s, aggs, need_count)
                                            for s in value.items.flat), value.shape)
            if slot is None:
                s = _scalar(value, None, kind) if isinstance(value, Scalar) else None
                if s is None:
                    raise QueryError(f"{kind}() without a predicate needs single-value elements")
                cond = _truthy(s)
            else:
                cond = _truthy(_scalar(value, src, f"{kind} predicate"))
            aggs.append(Agg(kind, (cond,), "bool"))
            return T.Finish(kind, here)
        if kind == "first":
            shape, fields, items = leaves(value)
            aggs.append(Agg("first", tuple(s.expr for s in items), "int64"))
            return T.Finish("first", here, shape=shape, fields=fields, times=times_of(items))
        if isinstance(value, ShapedVal) and kind in ("sum", "mean", "min", "max"):   # X.sum(axis=0)
            return T.ShapedFinish(tuple(self._agg(spec, slot, s, aggs, need_count)
                                        for s in value.items.flat), value.shape)
        if not isinstance(value, Scalar) and kind == "fold":
            raise QueryError(f"aggregate() folds single values; the elements are {element_type(value)}: "
                             f"select a value first, e.g. .select({pick_one(value)}).aggregate(func, seed)")
        if not isinstance(value, Scalar):
            raise QueryError(f"{kind}() needs single-value elements; the elements are "
                             f"{element_type(value)}: give {kind} a function that picks a value, "
                             f"e.g. .{kind}({pick_one(value)})")
        x = value.expr
        if value.time is not None:
            return self._time_agg(kind, value, aggs, need_count)
        if kind == "sum":
            acc, res = dtypes.sum_dtype(x.dtype)
            aggs.append(Agg("sum", (_cast(x, acc),), acc))
            return T.Finish("sum", here, result_dtype=res)
        if kind == "mean":
            acc, res = dtypes.mean_dtype(x.dtype)
            aggs.append(Agg("sum", (_cast(x, acc),), acc))
            return T.Finish("mean", here, need_count(), result_dtype=res)
        if kind in ("min", "max"):
            if x.dtype == "bool":   # min over bools is all(), max is any()
                aggs.append(Agg("all" if kind == "min" else "any", (x,), "bool"))
            else:
                aggs.append(Agg(kind, (x,), x.dtype))
            return T.Finish(kind, here, need_count(), result_dtype=x.dtype)
        if kind == "fold":
            return self._fold(spec, slot, value, aggs)
        raise QueryError(f"unknown aggregate {kind!r}")

    def _time_agg(self, kind: str, value: Scalar, aggs: list, need_count) -> T.Finish:
        """min / max of dates or durations, sum of durations, as NumPy gives them: NaT if
        any value is NaT (an any() beside the int64 min/max/sum of the ticks)."""
        x = weaken(value).expr
        if kind not in ("min", "max", "sum") or (kind == "sum" and value.time.startswith("datetime")):
            raise QueryError(f"{kind}() of {value.time} values is not supported: dates and "
                             f"durations have min() and max(), durations sum(); for a mean "
                             f"average their number of units ((d - epoch) / np.timedelta64(1, 'D'))")
        here = len(aggs)
        aggs.append(Agg(kind, (x,), "int64"))
        nat = len(aggs)
        aggs.append(Agg("any", (isnat(x),), "bool"))
        return T.Finish(kind, here, need_count() if kind != "sum" else -1,
                        result_dtype=value.time, nat=nat)

    def _fold(self, spec, slot: int, value: Scalar, aggs: list) -> T.Finish:
        """aggregate(func, seed): acc type is what func returns for (seed, element), to a
        fixpoint. The Agg is `in_order` unless func is proved (or stated) associative."""
        src = self.slots[slot][0]
        seed = spec.seed
        weak = {bool: "bool", int: "int", float: "float"}.get(type(seed))
        if weak is None and not hasattr(seed, "dtype"):
            raise QueryError(f"aggregate seed must be a number, got {type(seed).__name__}")
        acc_dtype = value.expr.dtype if weak else str(seed.dtype)
        for _ in range(3):
            acc = Scalar(E.Var("acc", acc_dtype), weak)
            item = Scalar(E.Var("item", acc_dtype), None)
            out = _scalar(self.call(slot, (acc, item)), src, "aggregate function")
            if out.expr.dtype == acc_dtype:
                break
            acc_dtype, weak = out.expr.dtype, None
        else:
            raise QueryError("aggregate function's result type does not settle; cast it explicitly, "
                             "e.g. lambda acc, v: np.float64(acc + v)")
        here = len(aggs)
        in_order = not spec.associative and not provably_associative(out.expr)
        aggs.append(Agg("fold", (_cast(value.expr, acc_dtype),), acc_dtype, out.expr,
                        _const(seed, acc_dtype), in_order))
        return T.Finish("fold", here, result_dtype=acc_dtype)
