"""Kernel IR building blocks of the GPU group_by (ops/group/gpu.py): the "lanes" (running
segmented folds of one aggregate each) and the ordered segmented block scan over them.

A lane is one value column folded per group: an aggregate's values (sum, min, max, any, all,
fold) or the row count (a sum of ones, int64). Its combine is an element expression
(codegen.expr, printed with the dialect's exact semantics): add (integers wrap), np.minimum /
np.maximum (NaN wins), logical or / and, or a fold's own `combine` over acc / item with its
Params (`acc` always the earlier rows).

Segmented fold. Rows in sorted order carry a head flag (the first row of a group). A pair
(f, v) = (some row of the range is a head, fold of the range's rows after its last head, or
of all of them without one) combines as
    (fa, a) + (fb, b) = (fa | fb, b if fb else combine(a, b))
which is associative and keeps row order, so any fixed grouping gives the group's fold over
its rows in order. `segmented_scan` is Hillis-Steele on these pairs: at step d thread t sets
s[t] = s[t - d] + s[t]; afterwards s[t] is the pair of threads 0..t of the block (valid
threads only: they form a prefix of the block and only read lower threads). The grouping
depends on nothing but the block and n, never on timing: float results are identical run to
run. A combine is evaluated only on real row values (never on an identity or a dummy), so a
fold need not have an identity and integer division in it never sees a made-up zero.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ... import dtypes as D
from ...ir import expr as E
from ...ir import kernel_ir as K
from ...launch import BLOCK, KernelArg
from ...lower.block import LID
from ...lower.element import check_name, rename
from ...ir.program import ElementProgram
from ...ir.stage_specs import GroupAgg, GroupSpec, check_combine

I32, I64 = "int32", "int64"
VALID = K.KVar("valid", "bool")
SH_F = "sh_flag"                    # int32[BLOCK]: the scan's head flags
_OPS = {"sum": "add", "min": "min", "max": "max", "any": "or", "all": "and"}
LANE_OPS = (*_OPS, "fold")


@dataclass(frozen=True)
class Lane:
    """A running segmented fold: of aggregate `agg`'s values, or (agg None) the row count."""
    stem: str                      # names: acc<stem>, x<stem>, sh_v<stem>, tile_v<stem>
    dtype: str
    op: str                        # sum min max any all fold
    agg: Optional[int] = None      # the aggregate's index in spec.aggs
    combine_expr: Optional[E.Expr] = None
    seed: Optional[E.Const] = None

    def var(self, prefix: str) -> K.KVar:
        return K.KVar(f"{prefix}{self.stem}", self.dtype)

    @property
    def shared(self) -> str:
        return f"sh_v{self.stem}"

    @property
    def tile(self) -> str:
        return f"tile_v{self.stem}"

    def zero(self) -> K.KConst:
        return K.KConst(0, self.dtype)


def lanes(spec: GroupSpec) -> list[Lane]:
    """The count lane, then one lane per aggregate that folds (first and count need none)."""
    out = [Lane("c", I64, "sum")]
    for a, agg in enumerate(spec.aggs):
        if agg.op in LANE_OPS:
            _check(spec, agg)
            out.append(Lane(str(a), agg.dtype, agg.op, a, agg.combine,
                            E.Const(agg.seed.value, agg.dtype) if agg.op == "fold" else None))
        elif agg.op not in ("first", "count"):
            raise ValueError(f"{spec.name}: unknown group aggregate {agg.op!r}")
    return out


def _check(spec: GroupSpec, agg: GroupAgg) -> None:
    if agg.op != "fold":
        return
    if agg.combine is None or agg.seed is None:
        raise ValueError(f"{spec.name}: a fold needs its combine and seed")
    check_combine(agg.combine, agg.dtype, spec.params, f"{spec.name}: a fold")


class Combiner:
    """combine(a, b) of a lane as a kernel expression (a: the earlier rows)."""

    def __init__(self, spec: GroupSpec):
        self._prog = ElementProgram((), spec.params, (), ())

    def __call__(self, lane: Lane, a, b) -> K.Elem:
        a, b = (E.Var(v.name, v.dtype) if isinstance(v, K.KVar) else v for v in (a, b))
        if lane.op == "fold":
            e = rename(lane.combine_expr, self._prog, {"acc": a, "item": b})
            return K.Elem(e if e.dtype == lane.dtype else E.Cast(e, lane.dtype))
        return K.Elem(E.Binary(_OPS[lane.op], a, b, lane.dtype))

    def finish(self, lane: Lane, run: K.KVar) -> K.KExpr:
        """A group's result from the fold of its rows: the seed goes in once, in front."""
        return self(lane, lane.seed, run) if lane.op == "fold" else run


def shared_arrays(ls: list[Lane]) -> list[K.SharedArray]:
    return [K.SharedArray(SH_F, I32, BLOCK)] + [K.SharedArray(ln.shared, ln.dtype, BLOCK) for ln in ls]


def segmented_scan(ls: list[Lane], comb: Combiner, flag: K.KExpr) -> list:
    """Ordered Hillis-Steele over the threads' pairs (flag, acc<lane>): afterwards sh_flag[t]
    and sh_v<lane>[t] hold the pair of threads 0..t. Threads with `valid` false take no part."""
    off, act, lf, rf = K.KVar("offset", I32), K.KVar("active", "bool"), K.KVar("lflag", I32), K.KVar("rflag", I32)
    left = [ln.var("left") for ln in ls]
    right = [ln.var("right") for ln in ls]
    at = K.op("-", LID, off)
    step = (K.Declare(act, K.op("&&", VALID, K.op(">=", LID, off))),
            K.Declare(lf, K.i32(0)),
            *[K.Declare(v, ln.zero()) for v, ln in zip(left, ls)],
            K.If(act, (K.Assign(lf, K.KLoad(SH_F, at, I32)),
                       *[K.Assign(v, K.KLoad(ln.shared, at, ln.dtype)) for v, ln in zip(left, ls)])),
            K.Barrier(),
            K.If(act, (K.Declare(rf, K.KLoad(SH_F, LID, I32)),
                       K.Comment("no head on the right: the left's open group continues into it"),
                       K.If(K.op("==", rf, K.i32(0)), (
                           K.Store(SH_F, LID, lf),
                           *[s for v, w, ln in zip(left, right, ls)
                             for s in (K.Declare(w, K.KLoad(ln.shared, LID, ln.dtype)),
                                       K.Store(ln.shared, LID, comb(ln, v, w)))])))),
            K.Barrier())
    return [K.Comment("Ordered segmented block scan (Hillis-Steele on (head flag, fold) pairs)."),
            K.Store(SH_F, LID, K.KCast(flag, I32)),
            *[K.Store(ln.shared, LID, ln.var("acc")) for ln in ls],
            K.Barrier(),
            K.For(off, K.i32(1), K.op("<", off, K.i32(BLOCK)), K.op("<<", off, K.i32(1)), step)]


def exclusive_prefix(ls: list[Lane], comb: Combiner, dest: str, carry: list) -> list:
    """Statements declaring <dest><lane>: the fold of everything before this thread's rows
    since the last head: `carry` (the lanes' values before the block's first thread)
    continued by threads 0..t-1's pair (after segmented_scan)."""
    before = [ln.var(dest) for ln in ls]
    prev = [ln.var("prev") for ln in ls]
    pf, at = K.KVar("pflag", I32), K.op("-", LID, K.i32(1))
    return [*[K.Declare(b, c) for b, c in zip(before, carry)],
            K.If(K.op("&&", VALID, K.op(">", LID, K.i32(0))), (
                K.Declare(pf, K.KLoad(SH_F, at, I32)),
                *[K.Declare(p, K.KLoad(ln.shared, at, ln.dtype)) for p, ln in zip(prev, ls)],
                K.If(K.op("!=", pf, K.i32(0)),
                     tuple(K.Assign(b, p) for b, p in zip(before, prev)),
                     tuple(K.Assign(b, comb(ln, b, p)) for b, p, ln in zip(before, prev, ls)))))]


def fold_in(ls: list[Lane], comb: Combiner, restart: K.KExpr, x: list) -> K.If:
    """acc<lane> = x if `restart` (a head, or the thread's first row) else combine(acc, x)."""
    return K.If(restart, tuple(K.Assign(ln.var("acc"), v) for ln, v in zip(ls, x)),
                tuple(K.Assign(ln.var("acc"), comb(ln, ln.var("acc"), v)) for ln, v in zip(ls, x)))


def value_size(dtype: str) -> int:
    return D.itemsize(dtype) if dtype != "bool" else 1


def result_args(spec: GroupSpec, keys: list) -> tuple[dict, dict, list, KernelArg, tuple]:
    """The arguments every group kernel set shares after its key columns `keys` (one layout
    for the sort-based path, ops/group/gpu.py, and the low-cardinality tables, ops/group/table_gpu.py):
    {agg: value column}, {agg: result column} (a count has neither: it is the group's row
    count), the group key outputs, the count output and the fold parameters."""
    m = len(spec.key_dtypes)
    values, outs, k = {}, {}, 0
    for a, agg in enumerate(spec.aggs):
        if agg.op != "count":
            values[a] = KernelArg(f"val{a}", "input", agg.dtype, m + k)
            outs[a] = KernelArg(f"res{a}", "output", agg.dtype, m + k)
            k += 1
    gkeys = [KernelArg(f"gkey{j}", "output", a.dtype, j) for j, a in enumerate(keys)]
    counts = KernelArg("gcount", "output", I64, m + k)
    params = tuple(KernelArg(f"p_{check_name(p.name, 'parameter')}", "param", p.dtype, i)
                   for i, p in enumerate(spec.params))
    return values, outs, gkeys, counts, params
