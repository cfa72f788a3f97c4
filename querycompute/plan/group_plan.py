"""Planning `group_by(key).agg(...)`: one fused pass computing the key and every aggregate's
input per element, then the backend's group_by column operation (GroupSpec), then the
result dict (DESIGN.md section 3: key columns first, then one column per named aggregate,
one row per group, groups sorted by key ascending with NaN last).

    q.where(p).group_by(lambda r: (r.flag, r.status)).agg(total=qc.sum(lambda r: r.qty),
                                                          n=qc.count)
    stage 1: fused pass: where p; key_0 = r.flag, key_1 = r.status; total's input r.qty
             (cast to its accumulator type) -> columns
    stage 2: group_by: groups of equal keys; per group sum, count
    result:  {"key_0": ..., "key_1": ..., "total": ..., "n": ...}

Per aggregate (its accumulator and result types are Query.agg's, terminals.py):
    count -> the group's row count (int64); count(pred) -> the sum of int64(bool(pred)); sum -> GroupAgg sum in the accumulator type, then
    the result type (float16 sums accumulate in float32); mean -> that sum / count;
    min / max -> of the value type (over bools: all / any); any / all -> bool;
    first -> the value of the group's first row; aggregate(func, seed) -> a fold.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from querycompute._codegen.ir import expr as E
from querycompute._codegen.dtypes import mean_dtype, sum_dtype
from querycompute._codegen.ir.stage_specs import GroupAgg, GroupSpec

from ..errors import QueryError
from .fusion import Lowering, _cast, _scalar, _truthy, leaves, refuse_strings, string_leaves
from .stage_kinds import Stage, traffic_lines
from ..frontend.datetimes import NAT, is_time_dtype, isnat, times_of, viewed, weaken
from ..frontend.values import Scalar, TupleVal


@dataclass(frozen=True)
class GroupStage(Stage):
    spec: GroupSpec
    keys: int                      # the first `keys` columns are the key columns
    values: tuple                  # per agg: its value column's index, or -1 (count)
    first: int                     # the spec's parameters start here in the plan's list
    ends_plan = True
    adds_floats_in_own_order = True

    def run(self, ex, call, i: int, state: list, keep):
        """The group_by ends the plan (stage_kinds' protocol): the runtime's groups."""
        p = call.params[self.first:self.first + len(self.spec.params)]
        values = [state[v] if v >= 0 else None for v in self.values]
        return state, keep, ex.runtime.group_by(self.spec, state[:self.keys], values, p, call.rows)

    def host_lines(self, runtime, element_dtypes) -> list:
        return runtime.describe_group_by(self.spec) or []

    def gpu_kernels(self, dialect: str, element_dtypes) -> list:
        from querycompute._codegen.ops.group import gpu as group
        from querycompute._codegen.ops.group import table_gpu as group_table
        return [("group_by, <= 4096 groups (tried first)", group_table.render_group_table(self.spec, dialect)),
                ("group_by", group.render_group(self.spec, dialect))]

    def gpu_traffic(self, dialect: str, element_dtypes) -> list:
        from querycompute._codegen.ops.group import gpu as group
        from querycompute._codegen.ops.group import table_gpu as group_table
        return traffic_lines(group.describe(self.spec), group.bytes_per_element(self.spec, dialect=dialect),
                             after=group_table.explain_lines(self.spec))


@dataclass(frozen=True)
class GroupResult:
    """Raw (group keys, agg columns, counts) -> the result dict."""
    key_names: tuple
    names: tuple                   # per named aggregate
    rules: tuple                   # per named aggregate: (kind, agg index, result dtype)
    strings: tuple = ()            # (key column, string column): keys decoded to strings
    key_times: tuple = ()          # per key column: its datetime64/timedelta64 type or None

    def __call__(self, raw) -> dict:
        keys, cols, counts = raw
        out = dict(zip(self.key_names, viewed(tuple(keys), self.key_times)))
        for name, (kind, at, dtype) in zip(self.names, self.rules):
            if kind == "count":
                out[name] = _array(counts).astype(np.int64, copy=False)
            elif kind == "mean":
                acc = _plus_zero(cols[at])
                with np.errstate(all="ignore"):
                    out[name] = (acc / counts.astype(acc.dtype)).astype(dtype)
            elif is_time_dtype(dtype):    # ticks; a max's NaT stood in as int64 max
                col = _array(cols[at])
                if kind == "max":
                    col = np.where(col == np.iinfo(np.int64).max, NAT, col)
                out[name] = col.astype(np.int64, copy=False).view(dtype)
            else:
                col = _plus_zero(cols[at]) if kind == "sum" else _array(cols[at])
                with np.errstate(over="ignore"):
                    out[name] = col.astype(dtype, copy=False)
        return out


def _plus_zero(x):
    """A float sum as NumPy's: np.sum starts from +0.0, so a group of only -0.0 sums to 0.0
    (np.sum([-0.0]) is 0.0), while a segmented reduction starting from a group's first value
    keeps -0.0. x + 0.0 turns -0.0 into 0.0 and leaves every other value (NaN too) as it is."""
    x = _array(x)
    return x + x.dtype.type(0) if x.dtype.kind == "f" else x


def _array(x):
    """x as an array where it is one already (CuPy columns of a device query stay there)."""
    return x if hasattr(x, "astype") else np.asarray(x)


def _key_names(key) -> tuple:
    if isinstance(key, Scalar):
        return ("key",)
    if isinstance(key, TupleVal):
        return tuple(f"key_{i}" for i in range(len(key.items)))
    return tuple(name for name, _ in key.fields)


def plan_group(planner, ops: list, at: int):
    """The group_by node at index `at` after the select/where slots `ops`, and the terminal
    (its named aggregates): appends the pass and the GroupStage to `planner`; returns the
    GroupResult that makes the user's dict."""
    nodes, infos, term = planner.nodes, planner.infos, planner.term
    lw = planner._lowering()
    element, inputs = planner._start(lw)
    element = lw.chain(element, tuple((nodes[s].kind, s) for s in ops))
    key = lw.b.bind(lw.apply(at, element))
    key_names = _key_names(key)
    key_leaves = leaves(key)[2]
    folds = Lowering(infos, "qc_group_fold")        # the folds' combines: the stage's params
    columns, aggs, rules = [], [], []
    # (GroupAgg, value expression) -> agg index: an aggregate asked for twice (Q1's sum and
    # mean of one column) is computed once; both results read it (the same bits either way)
    same: dict = {}
    slot = len(nodes)
    for name, spec in term.specs:
        if name in key_names:
            raise QueryError(f"aggregate name {name!r} is also a key column; name it otherwise")
        fn_slot = None
        if spec.fn is not None:
            fn_slot, slot = slot, slot + 1
        kind = spec.kind
        if kind == "count" and fn_slot is None:
            agg, rule, column = GroupAgg("count", "int64"), ("count", "int64"), None
        elif kind == "count":           # count(pred): the per-group sum of int64(bool(pred))
            cond = _truthy(_scalar(lw.apply(fn_slot, element), lw.slots[fn_slot][0], "count predicate"))
            agg, rule = GroupAgg("sum", "int64"), ("sum", "int64")
            column = Scalar(E.Cast(cond, "int64"), None)
        else:
            value = element if fn_slot is None or kind == "fold" else lw.apply(fn_slot, element)
            refuse_strings(value, f"qc.{kind} in group_by")
            if not isinstance(value, Scalar):
                what = "aggregate(func, seed)" if kind == "fold" else kind
                raise QueryError(f"qc.{what} in group_by needs a single value per element"
                                 + ("; select the value to fold first" if kind == "fold" else
                                    f"; give it a function that picks one, e.g. qc.{kind}(lambda r: r.price)"))
            agg, rule, column = _column(kind, value, spec, fn_slot, folds)
        k = same.get((agg, None if column is None else column.expr))
        if k is None:
            k = same[(agg, None if column is None else column.expr)] = len(aggs)
            aggs.append(agg)
            if column is not None:
                columns.append(column)
        rules.append((rule[0], k, rule[1]))
    planner.materialize_columns(lw, inputs, list(key_leaves) + columns, "key + aggregate inputs")
    keys = len(key_leaves)
    spec = GroupSpec(tuple(s.expr.dtype for s in key_leaves), tuple(aggs), tuple(folds.b.params),
                     f"qc_group{len(planner.stages)}")
    value_at, c = [], keys
    for agg in aggs:
        value_at.append(-1 if agg.op == "count" else c)
        c += agg.op != "count"
    first = len(planner.bindings)
    planner.bindings += folds.b.bindings
    planner.limits += [None] * len(folds.b.bindings)
    planner.stages.append(GroupStage(spec, keys, tuple(value_at), first))
    planner.texts.append(f"group_by: groups of equal keys ({', '.join(spec.key_dtypes)}), sorted by key; "
                         f"per group {', '.join(a.op for a in aggs)} in source order"
                         + ("; a fold not provably associative runs row by row from its seed"
                            if any(a.in_order for a in aggs) else ""))
    return GroupResult(key_names, tuple(name for name, _ in term.specs), tuple(rules),
                       string_leaves(key_leaves), times_of(key_leaves))


def _time_column(kind, v: Scalar) -> tuple:
    """min / max / first of dates or durations per group, NumPy's NaT rules: NaT (int64
    min) wins a min as it is; for a max it stands in as int64 max (GroupResult maps it back)."""
    if kind not in ("min", "max", "first"):
        raise QueryError(f"qc.{kind} of {v.time} values in group_by is not supported: dates "
                         f"and durations have qc.min, qc.max and qc.first; for a sum or mean "
                         f"aggregate their number of units ((d - epoch) / np.timedelta64(1, 'D'))")
    x = weaken(v).expr
    if kind == "max":
        x = E.Where(isnat(x), E.Const(int(np.iinfo(np.int64).max), "int64"), x, "int64")
    return GroupAgg(kind, "int64"), (kind, v.time), Scalar(x, None)


def _column(kind, v: Scalar, spec, fn_slot, folds: Lowering) -> tuple:
    """(GroupAgg, (result kind, result dtype), value column) of one aggregate."""
    if v.time is not None:
        return _time_column(kind, v)
    x = v.expr
    if kind in ("sum", "mean"):
        acc, res = sum_dtype(x.dtype) if kind == "sum" else mean_dtype(x.dtype)
        return GroupAgg("sum", acc), (kind, res), Scalar(_cast(x, acc), None)
    if kind in ("min", "max"):
        op = kind if x.dtype != "bool" else ("all" if kind == "min" else "any")
        return GroupAgg(op, x.dtype), (kind, x.dtype), v
    if kind in ("any", "all"):
        return GroupAgg(kind, "bool"), (kind, "bool"), Scalar(_truthy(v), None)
    if kind == "first":
        return GroupAgg("first", x.dtype), (kind, x.dtype), v
    if kind == "fold":
        got: list = []
        finish = folds._fold(spec, fn_slot, Scalar(E.Var("x", x.dtype), None), got)
        acc = finish.result_dtype
        return (GroupAgg("fold", acc, got[0].combine, got[0].seed, got[0].in_order), ("fold", acc),
                Scalar(_cast(x, acc), None))
    raise QueryError(f"qc.{kind} is not an aggregate group_by knows")
