"""Staged plans: a chain with pipeline breakers as fused passes and column operations.

A chain without breakers is one fused pass (plan.py). Breakers (order_by / then_by, take /
skip, take_while / skip_while, reverse, distinct, scan; DESIGN.md section 5b) and the
positional terminals (last, element_at, single) plan here as a list of stages that
pipeline.py runs, one after the other, on one backend:

    PassStage     a fused pass (plan.py's machinery): the selects/wheres since the previous
                  breaker, plus what the next breaker needs computed per element (its sort or
                  distinct keys, a scan's accumulator type), materialized as columns
    SortStage     stable sort permutation of key columns, then a gather of the element
                  columns; a take/skip right after it makes it a top-k (k = the window's end;
                  order_by(k).first() is a top-1, a min-by), never a full sort
    DistinctStage first-occurrence flags of key columns; the next pass starts by filtering
                  on them (its compaction restores element order)
    SemiJoinStage intersect_by / except_by: membership flags of key columns in the other
                  query's keys (join_plan.py); filtered on like distinct's
    ScanStage     the inclusive running fold of the one element column
    ReverseStage  the columns in reverse order
    WhileStage    take_while / skip_while: a `first` reduction (with early exit) finds the
                  first element whose predicate is false, then the columns are cut there
    WindowStage   take / skip where no pass precedes (the columns are sliced)
    TerminalStage the last selects/wheres and the terminal: a reduction, the element columns,
                  or for last / element_at / single the few rows they need

The columns between stages are the element's leaves (Columns: shape, field names, dtypes)
and, where a breaker needs them, key columns after them. A stage never runs a pass that would
only copy columns (an empty chain before a sort by the element itself, a reverse, ...): the
columns go on as they are.

Parameters: every pass has its own parameters (captured values); the staged plan's
`bindings` is all of them in stage order, plus the n of every take / skip / element_at
(read on every run, so a new n never recompiles). Each stage knows where its own start.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

import numpy as np

from querycompute._codegen.ir import expr as E
from querycompute._codegen.ir.program import Agg, Filter, Reduce
from querycompute._codegen.ir.stage_specs import ScanSpec, SortSpec

from ..graph import graph as G
from ..graph import terminals as T
from ..errors import QueryError
from .fusion import (Lowered, Lowering, _scalar, _truthy, element_type, key_leaves, leaves,
    param_limits, pick_one, string_leaves)
from ..frontend.datetimes import host_dtype, is_time_dtype, isnat, storage, weaken
from ..frontend.values import RecordVal, Scalar, TupleVal
from . import logical
from .group_plan import plan_group
from .join_plan import plan_join, plan_semi_join
from .plan import initial_element
from .stage_kinds import (Columns, DistinctStage, PassStage, ReverseStage, ScanStage, SortStage,
    StagedLowered, TerminalStage, WhileStage, Window, WindowStage, element_of)


class _Planner:
    def __init__(self, source, dts: tuple, nodes: tuple, term, infos: list, logical=None, sides=None):
        self.source, self.nodes, self.term, self.infos = source, nodes, term, infos
        self.sides = sides         # runs a join's other side (a Chain) for its schema (join_plan)
        self.logical = logical     # the optimized logical plan (logical.py): what each stage carries
        self.at = 0                # the node the current planner step plans
        self.stages: list = []
        self.texts: list = []
        self.bindings: list = []
        self.limits: list = []
        self.keep = False          # the next pass filters on a distinct's keep flags
        self.keep_not = False      # ... keeping the unflagged rows instead (except_by)
        if source.kind == "range":
            self.cols = None       # a range has no columns: the first pass computes it
        else:
            shape = {"array": "scalar", "zip": "tuple", "table": "record"}[source.kind]
            strings = source._table.strings if source._table is not None else ()
            self.cols = Columns(shape, tuple(source.fields) if shape == "record" else (), dts,
                                tuple((i, f) for i, f in enumerate(source.fields) if f in strings))
        self.source_cols = self.cols   # a table's skipped columns name why when a lambda reads one
        self.dts = dts
        self.n_passes = 0

    # -- building passes ----------------------------------------------------------------
    def _lowering(self) -> Lowering:
        self.n_passes += 1
        return Lowering(self.infos, f"qc_stage{self.n_passes}")

    def _start(self, lw: Lowering):
        """(element, inputs) the next pass starts from: the source or the current columns."""
        from querycompute._codegen.ir.program import InputSpec
        if self.cols is None:
            return initial_element(self.source, self.dts, lw)
        c = self.cols
        inputs = [InputSpec(f"c{i}", storage(d)) for i, d in enumerate(c.dtypes)]
        if self.keep:
            inputs.append(InputSpec("keep", "bool"))
            flag = E.Load(len(c.dtypes), "bool")
            lw.b.body.append(Filter(E.Unary("not", flag, "bool") if self.keep_not else flag))
        element = element_of(c)
        if c is self.source_cols and self.source.skipped:
            element = RecordVal(element.fields, tuple(self.source.skipped.items()))
        return element, inputs

    def _add(self, lowered: Lowered) -> int:
        first = len(self.bindings)
        self.bindings += lowered.bindings
        self.limits += lowered.limits
        return first

    def _range_at(self, lowered: Lowered) -> tuple:
        at = [-1, -1]
        for i, key in enumerate(lowered.bindings):
            if key[0] == "range":
                at[0 if key[1] == 0 else 1] = i
        return tuple(at)

    def _count_param(self, slot: int) -> int:
        self.bindings.append((slot, "n", "int64"))
        self.limits.append(None)
        return len(self.bindings) - 1

    def _window(self, i: int) -> tuple[Window, int]:
        """The take / skip operators from node i on, as one Window; and the next node."""
        ops = []
        while i < len(self.nodes) and self.nodes[i].stage == "window":
            ops.append((self.nodes[i].kind, self._count_param(i), 0))
            i += 1
        return Window(tuple(ops)), i

    def materialize(self, ops: list, extra=lambda lw, element: (), cast=None, window=None,
                    forward: bool = False, select: bool = False):
        """A pass over the current columns running `ops` (select / where, by slot); its
        outputs are the element's leaves (cast to `cast`) then the leaves `extra` computes.
        Returns (element value, number of element leaf columns, key column indexes, every
        column's dtype). No pass when it would only copy the columns. `forward`: the stage
        after it only reads its columns (a join's side, a distinct), so a first pass that only copies
        source columns states which (PassStage.picks: a host runtime hands them on), and a key
        that is an element column is not stored twice (its index is the element column's).
        `select` (a join's side): a first pass that filters source columns and computes
        nothing of the element also gets the variant storing only the survivors' row numbers
        and keys (PassStage.selects: a runtime with indexed passes reads the source columns
        in place through them), where those are fewer bytes per survivor than its columns
        (TPC-H Q3's lineitem: 16 instead of 24; not Q12's, whose element is one uint8)."""
        keys_fn = extra
        carry = self._carry()
        if not ops and not self.keep and self.cols is not None and cast is None and window is None \
                and (carry is None or self.cols.shape != "record" or set(carry) >= set(self.cols.fields)):
            probe = _Probe(self.cols)
            try:
                keys = keys_fn(probe, probe.element)
                return (probe.element, len(self.cols.dtypes), tuple(k.expr.input for k in keys),
                        tuple(storage(d) for d in self.cols.dtypes))
            except _NeedsPass:
                pass
        lw = self._lowering()
        element, inputs = self._start(lw)
        element = lw.chain(element, tuple((self.nodes[s].kind, s) for s in ops))
        shape, fields, items = leaves(element)
        if shape == "parts":               # (the staged operators read scalar columns)
            raise QueryError("a pipeline operator over tuples / records with shaped items is not "
                             "supported yet; select scalar values first")
        if cast is not None:
            items = (Scalar(E.Cast(items[0].expr, cast) if items[0].expr.dtype != cast else items[0].expr, None),)
        keys = keys_fn(lw, element)
        if shape == "record" and carry is not None and set(carry) < set(fields):
            kept = [k for k, f in enumerate(fields) if f in carry]     # projection pushdown
            fields, items = tuple(fields[k] for k in kept), tuple(items[k] for k in kept)
            element = RecordVal(tuple(zip(fields, items)))
        key_cols, extra = [], []
        for k in keys:                 # (forward: a key that is an element column is read there)
            same = [j for j, s in enumerate(items) if s.expr == k.expr] if forward else []
            key_cols.append(same[0] if same else len(items) + len(extra))
            extra += [] if same else [k]
        outs = list(items) + extra
        reads = (f"keep the {'unflagged' if self.keep_not else 'flagged'} elements" + (" -> " if ops else "")) \
            if self.keep else ""
        filtered = any(isinstance(st, Filter) for st in lw.b.body)
        first = not self.keep and self.cols is self.source_cols and window is None and cast is None
        picks = _picks(inputs, outs) if forward and not ops and first and not filtered else None
        hands_on = _picks(inputs, items) if select and first and filtered and items \
            and _width([E.Index()] + [k.expr for k in keys]) < _width([o.expr for o in outs]) else None
        selects = None if hands_on is None else \
            lw.to_array(inputs, TupleVal((Scalar(E.Index()),) + tuple(keys)))
        self.materialize_columns(lw, inputs, outs, f"{reads}{_ops_text(self.nodes, ops, not reads)}"
                                 f"{' + keys' if keys else ''}", window, picks)
        if selects is not None:
            self.stages[-1] = replace(self.stages[-1], selects=selects, hands_on=hands_on)
            self.texts[-1] += SELECTS_TEXT
        self.cols = Columns(shape, fields, tuple(host_dtype(s) for s in items), string_leaves(items))
        return element, len(items), tuple(key_cols), tuple(s.expr.dtype for s in outs)

    def materialize_columns(self, lw: Lowering, inputs, outs: list, what: str, window=None,
                            picks=None) -> Lowered:
        """The pass `lw` has built so far, storing the scalar values `outs` as columns (its
        survivors only; with `window`, those of the window's ranks)."""
        filtered = any(isinstance(st, Filter) for st in lw.b.body)
        lowered = lw.to_array(inputs, TupleVal(tuple(outs)) if len(outs) > 1 else outs[0],
                              window=window is not None and filtered)
        self.stages.append(PassStage(lowered, self._add(lowered), self.keep, window, self._range_at(lowered),
                                     picks))
        self.texts.append(f"fused pass {lowered.pass_.name}: {what} -> columns"
                          f"{' (window: take/skip)' if window else ''}"
                          f"{PICKS_TEXT if picks is not None else ''}")
        self.keep = self.keep_not = False
        return lowered

    # -- the chain ------------------------------------------------------------------------
    def plan(self) -> StagedLowered:
        """Cut the chain at its pipeline breakers: each run of fused operators (select /
        where / a join's result) goes into the pass of the breaker after it, which its node
        class names (`Op.stage`: the planner step `plan_<stage>`, returning the index of the
        next node, or the finished plan for a group_by, which ends the chain)."""
        nodes, i = self.nodes, 0
        while True:
            ops = []
            while i < len(nodes) and not nodes[i].breaks_stage:
                ops.append(i)
                i += 1
            if i == len(nodes):
                return self.terminal(ops)
            if nodes[i].stage is None:
                raise QueryError(f"{nodes[i].kind}() must follow order_by() or another then_by()")
            self.at = i
            got = getattr(self, "plan_" + nodes[i].stage)(ops, i)
            if isinstance(got, StagedLowered):
                return got
            i = got

    def _carry(self) -> tuple | None:
        """The record fields the current breaker's stage stores (logical.project), or None."""
        if self.logical is None or self.at >= len(self.logical.nodes):
            return None
        return self.logical.nodes[self.at].carry

    # -- the planner steps, one per breaking operator (Op.stage) -----------------------------
    def plan_window(self, ops: list, i: int) -> int:
        window, i = self._window(i)
        if ops or self.keep or self.cols is None:
            self.materialize(ops, window=window)
        else:
            self.stages.append(WindowStage(window))
            self.texts.append("take/skip: the columns are sliced")
        return i

    def plan_take_while(self, ops: list, i: int) -> int:
        self.take_while(ops, i)
        return i + 1

    def plan_reverse(self, ops: list, i: int) -> int:
        self.materialize(ops)
        self.stages.append(ReverseStage())
        self.texts.append("reverse: the columns in reverse order")
        return i + 1

    def plan_distinct(self, ops: list, i: int) -> int:
        self.distinct(ops, i)
        return i + 1

    def plan_scan(self, ops: list, i: int) -> int:
        self.scan(ops, i)
        return i + 1

    def plan_join(self, ops: list, i: int) -> int:
        plan_join(self, ops, i)
        return i + 2                   # the result function is the next pass's first select

    def plan_semi_join(self, ops: list, i: int) -> int:
        plan_semi_join(self, ops, i)
        return i + 2                   # the next pass keeps the flagged rows

    def plan_group(self, ops: list, i: int) -> StagedLowered:
        result = plan_group(self, ops, i)
        return StagedLowered(tuple(self.stages), tuple(self.bindings), tuple(self.limits), (),
                             "record", result.key_names + result.names, tuple(self.texts), result,
                             strings=result.strings)

    def _key_leaves(self, lw, element, slot: int, what: str) -> tuple:
        if self.nodes[slot].fn is None:
            key = element
            # distinct() of records compares every field (LINQ's equality of anonymous types);
            # records have no order of their own, so sorting one needs a key.
            if isinstance(key, RecordVal) and what != "distinct":
                raise QueryError(f"{what}() of records needs a key: e.g. {what}(lambda r: r.price)")
        else:
            key = lw.apply(slot, element)
        return key_leaves(key)

    def plan_sort(self, ops: list, i: int) -> int:
        sorts = [i]
        i += 1
        while i < len(self.nodes) and self.nodes[i].then:
            sorts.append(i)
            i += 1
        directions: list = []

        def keys(lw, element):
            out = []
            for s in sorts:
                got = _nat_last(self._key_leaves(lw, element, s, self.nodes[s].kind), lw)
                directions.extend([self.nodes[s].descending] * len(got))
                out += got
            return tuple(out)
        element, n_elem, key_cols, all_dts = self.materialize(ops, keys)
        spec = SortSpec(tuple(all_dts[k] for k in key_cols), tuple(directions), f"qc_sort{len(self.stages)}")
        window = None
        if i < len(self.nodes) and self.nodes[i].stage == "window":
            window, i = self._window(i)
        elif i == len(self.nodes) and self.term.name in ("first", "element_at") and not _has_where(self.nodes, i):
            window = self._top_for_terminal()
        values_only = n_elem == 1 and key_cols == (0,) and window is None
        self.stages.append(SortStage(spec, key_cols, n_elem, values_only, window))
        what = "top-k (no full sort)" if window is not None else "stable sort"
        keys_text = ", ".join(d + (" desc" if r else "") for d, r in zip(spec.key_dtypes, spec.descending))
        self.texts.append(f"{what} by {len(key_cols)} key column{'s' * (len(key_cols) > 1)} ({keys_text})"
                          f"{', then gather' if not values_only else ''}")
        return i

    def _top_for_terminal(self) -> Optional[Window]:
        """order_by(k).first() is a top-1 (a min-by); .element_at(i) a top-(i + 1)."""
        _, spec = self.term.specs[0]
        if self.term.name == "first":
            return Window((("take", -1, 1),)) if spec.fn is None else None
        return Window((("upto", self._count_param(len(self.nodes)), 0),))

    def take_while(self, ops: list, i: int) -> None:
        self.materialize(ops)
        lw = self._lowering()
        element, inputs = self._start(lw)
        src = self.infos[i][0]
        cond = _truthy(_scalar(lw.apply(i, element), src, f"{self.nodes[i].kind} predicate"))
        lw.b.body.append(Filter(E.Unary("not", cond, "bool")))
        prog = lw.program(inputs, [])
        from querycompute._codegen.ir.program import Pass
        p = Pass(prog, Reduce((Agg("first", (E.Const(0, "int32"),), "int64"),)), lw.name)
        lowered = Lowered(p, tuple(lw.b.bindings), "scalar", (), (), tuple(lw.steps), param_limits(p))
        take = self.nodes[i].kind == "take_while"
        self.stages.append(WhileStage(lowered, self._add(lowered), take))
        self.texts.append(f"{self.nodes[i].kind}: reduction {p.name} finds the first element whose "
                          f"predicate is false (early exit), then the columns are cut there")

    def distinct(self, ops: list, i: int) -> None:
        element, n_elem, key_cols, all_dts = self.materialize(
            ops, lambda lw, el: self._key_leaves(lw, el, i, "distinct"), forward=True)
        spec = SortSpec(tuple(all_dts[k] for k in key_cols), (False,) * len(key_cols),
                        f"qc_distinct{len(self.stages)}")
        self.stages.append(DistinctStage(spec, key_cols, n_elem))
        self.texts.append(f"distinct: first-occurrence flags of {len(key_cols)} key column"
                          f"{'s' * (len(key_cols) > 1)}; the next pass keeps flagged elements in order")
        self.keep = True

    def scan(self, ops: list, i: int) -> None:
        # The accumulator type first (the fold's rules): it decides the column's cast. The
        # combine function is translated in a Lowering of its own: its parameters are the
        # scan's, not a pass's.
        lw = Lowering(self.infos, "qc_scan")
        dtype = self._element_dtype(ops)
        value = Scalar(E.Var("x", dtype), None)
        aggs: list = []
        arg = self.nodes[i].fn
        seed = arg.seed
        finish = lw._fold(T.AggSpec("fold", arg.fn, seed=seed, associative=arg.associative), i, value, aggs)
        spec = ScanSpec(finish.result_dtype, aggs[0].combine, aggs[0].seed, tuple(lw.b.params),
                        f"qc_scan{len(self.stages)}", aggs[0].in_order)
        self.materialize(ops, cast=spec.dtype if spec.dtype != dtype else None)
        first = len(self.bindings)
        self.bindings += lw.b.bindings
        self.limits += [None] * len(lw.b.bindings)
        self.stages.append(ScanStage(spec, first))
        self.texts.append(f"scan: inclusive running fold ({spec.dtype}, seed {seed!r})"
                          + ("; in element order (func not proved associative)" if spec.in_order else ""))
        self.cols = Columns("scalar", (), (spec.dtype,))

    def _element_dtype(self, ops: list) -> str:
        """The element's dtype after `ops` (it must be a single value)."""
        lw = Lowering(self.infos, "qc_probe")
        element, _ = self._start(lw)
        element = lw.chain(element, tuple((self.nodes[s].kind, s) for s in ops))
        if not isinstance(element, Scalar):
            raise QueryError(f"scan() needs single-value elements; the elements are {element_type(element)}: "
                             f"select one value first, e.g. .select({pick_one(element)}).scan(...)")
        return element.expr.dtype

    # -- the terminal ---------------------------------------------------------------------
    def terminal(self, ops: list) -> StagedLowered:
        term = self.term
        positional = term.name if term.name in G.POSITIONAL else ""
        if positional:
            lowered, window = self.positional(ops, positional)
        elif not ops and not self.keep and self.cols is not None and not term.specs:
            lowered, window = None, None           # to_array of the columns as they are
        else:
            lw = self._lowering()
            element, inputs = self._start(lw)
            element = lw.chain(element, tuple((self.nodes[s].kind, s) for s in ops))
            lowered, window = lw.terminal(inputs, element, term, len(self.nodes)), None
        first = self._add(lowered) if lowered is not None else len(self.bindings)
        range_at = self._range_at(lowered) if lowered is not None else (-1, -1)
        self.stages.append(TerminalStage(lowered, first, self.keep, positional, window, range_at))
        self.texts.append(f"terminal {term.name}: " + (f"fused pass {lowered.pass_.name} ({lowered.pass_.stage_op})"
                                                       if lowered is not None else "the columns as they are"))
        if lowered is not None:
            shape, fields = lowered.shape, lowered.fields
            finishes, strings, times = lowered.finishes, lowered.strings, lowered.times
        else:
            shape, fields, finishes, strings = self.cols.shape, self.cols.fields, (), self.cols.strings
            times = tuple(d if is_time_dtype(d) else None for d in self.cols.dtypes)
            times = times if any(times) else ()
        if positional:
            finishes = (T.Finish("first", 0, shape=shape, fields=fields, times=times),)
            if strings:
                raise QueryError(f"{positional}() of elements holding string column "
                                 f"{strings[0][1]!r} is not supported yet; use .take(n).to_list()")
        return StagedLowered(tuple(self.stages), tuple(self.bindings), tuple(self.limits), finishes,
                             shape, fields, tuple(self.texts), strings=strings, times=times)

    def positional(self, ops: list, name: str):
        """last / element_at / single: the surviving elements (the predicate as one more
        filter), of which the run keeps the rows it needs: single a window [0, 2),
        element_at [i, i + 1), last all of them."""
        lw = self._lowering()
        element, inputs = self._start(lw)
        element = lw.chain(element, tuple((self.nodes[s].kind, s) for s in ops))
        _, spec = self.term.specs[0]
        slot = len(self.nodes)
        window = None
        if name == "element_at":
            window = Window((("at", self._count_param(slot), 0), ("take", -1, 1)))
        elif spec.fn is not None:
            src = self.infos[slot][0]
            lw.b.body.append(Filter(_truthy(_scalar(lw.apply(slot, element), src, f"{name} predicate"))))
        if name == "single":
            window = Window((("take", -1, 2),))
        filtered = any(isinstance(st, Filter) for st in lw.b.body)
        return lw.to_array(inputs, element, window=window is not None and filtered), window


PICKS_TEXT = (" (it only copies source columns: a host runtime hands them on as they are, "
              "read-only, when they are contiguous in its dtypes)")


SELECTS_TEXT = (" (a runtime with indexed passes stores only the survivors' row numbers and keys, "
                "and reads this side's columns in place through them)")


def _width(exprs) -> int:
    """Bytes per row of columns of these expressions' dtypes."""
    return sum(np.dtype(e.dtype).itemsize for e in exprs)


def _picks(inputs, outs) -> tuple | None:
    """The source column index of each output when every output is a source column loaded
    as it is stored (a plain field read: no conversion, no computation), else None."""
    picks = []
    for o in outs:
        e = getattr(o, "expr", None)
        if type(e) is not E.Load or e.input >= len(inputs) or inputs[e.input].dtype != e.dtype \
                or inputs[e.input].element:
            return None
        picks.append(e.input)
    return tuple(picks)


class _Probe:
    """Stands in for a Lowering when no pass runs: the element is the columns' loads and a
    key function's leaves are checked to be columns as they are."""
    def __init__(self, cols: Columns):
        self.element = element_of(cols)

    def apply(self, slot, element):
        raise _NeedsPass           # a key function is computed by a pass


class _NeedsPass(Exception):
    pass


def _nat_last(leaves: tuple, lw) -> tuple:
    """Sort key leaves with each date / duration led by its NaT test, so that NaT sorts
    after every date as np.sort puts it (a descending sort is the reverse: NaT first)."""
    if not any(s.time is not None for s in leaves):
        return leaves
    if isinstance(lw, _Probe):
        raise _NeedsPass               # the NaT test is computed by a pass
    out = []
    for s in leaves:
        if s.time is not None:
            out.append(Scalar(isnat(weaken(s).expr)))
        out.append(s)
    return tuple(out)


def _has_where(nodes: tuple, i: int) -> bool:
    return any(n.kind == "where" for n in nodes[i:])


def _ops_text(nodes: tuple, ops: list, read: bool = True) -> str:
    return " -> ".join(nodes[s].kind for s in ops) or ("read" if read else "")


def lower_staged(source, dts: tuple, nodes: tuple, term, infos: list, sides=None) -> StagedLowered:
    """The staged plan of a chain: its logical plan optimized (logical.py), then cut into
    stages. The optimized chain's slots are mapped back to the user's in the bindings, so a
    call's captured values bind as the user's chain numbers them."""
    lp = logical.optimize(logical.build(source.kind, tuple(source.fields), dts, nodes, term, infos))
    staged = _Planner(source, dts, lp.chain(), term, lp.chain_infos(), lp, sides).plan()
    bindings = tuple((lp.slot_of(b[0]),) + tuple(b[1:]) if type(b[0]) is int else b for b in staged.bindings)
    return replace(staged, bindings=bindings, logical=tuple(lp.text()), optimizer=lp.notes)
