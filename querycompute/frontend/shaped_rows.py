"""Long rows (seed 002): a row of k values, k above the scalarization limit, in a lambda.

A long row is a `ShapedVal` whose `row` is a `RowContext` and whose single item is the
row's *entry expression*: a Scalar over Load(0) (the entry x[i, j]) and the row scalars
computed so far. Elementwise operations build on that expression exactly as on a scalar;
a reduction (r.sum(), r.max(), np.linalg.norm(r), r @ w ...) closes it: it appends a
`RowStep` -- "reduce this entry expression over j" -- and returns a row scalar Var("rowK")
that later expressions may use (logsumexp: row0 = max_j x, row1 = sum_j exp(x - row0)).
The select's value must be a row scalar; querycompute/plan/rows.py runs the steps (NumPy's axis
functions, or a numba kernel: one row per iteration, parallel over rows).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from querycompute._codegen.dtypes import mean_dtype, sum_dtype
from querycompute._codegen.ir.expr import Binary, Cast, Const, Expr, Var
from .translate_ops import fail, to_dtype, truthy
from .values import Scalar

ROW_KINDS = ("sum", "prod", "mean", "min", "max", "any", "all")


@dataclass(frozen=True)
class RowStep:
    op: str            # sum | prod | min | max | and | or
    entry: Expr        # the value reduced, per entry (over Load(0) and earlier row vars)
    dtype: str         # accumulator dtype
    name: str          # the row var it defines


class RowContext:
    def __init__(self, k: int):
        self.k = k
        self.steps: list[RowStep] = []

    def reduce(self, kind: str, s: Scalar, axis, at: str) -> Scalar:
        if axis not in (None, 0, -1, (0,), (-1,)):
            fail(at, f"axis {axis!r} is out of bounds for a row (1 dimension)", "axis")
        if kind not in ROW_KINDS:
            fail(at, f"{kind} over a long row is not supported; supported: "
                     f"{' '.join(ROW_KINDS)}, dot / @ / np.linalg.norm", kind)
        d = s.dtype
        if kind in ("any", "all") or (d == "bool" and kind in ("min", "max")):
            op = "or" if kind in ("any", "max") else "and"
            return self._step(op, truthy(s), "bool")
        if kind in ("min", "max"):
            return self._step(kind, s.expr, d)
        acc, res = mean_dtype(d) if kind == "mean" else sum_dtype(d)
        out = self._step("prod" if kind == "prod" else "sum", to_dtype(s, acc, at), acc).expr
        if kind == "mean":
            out = Binary("truediv", out, Const(float(self.k), acc), acc)
        return Scalar(out if res == acc else Cast(out, res))

    def _step(self, op: str, entry: Expr, dtype: str) -> Scalar:
        for st in self.steps:              # the same reduction twice (r.max() - ... r.max())
            if (st.op, st.entry, st.dtype) == (op, entry, dtype):
                return Scalar(Var(st.name, dtype))
        name = f"row{len(self.steps)}"
        self.steps.append(RowStep(op, entry, dtype, name))
        return Scalar(Var(name, dtype))


def row_value(ctx: RowContext, entry: Scalar):
    from .shaped import ShapedVal
    items = np.empty(1, object)
    items[0] = entry
    return ShapedVal(items, ctx)


def context_of(args) -> RowContext | None:
    """The row context among values (one at most: zipped long rows share their j)."""
    from .shaped import ShapedVal
    for a in args:                 # (one per query: every long-row input shares it)
        if isinstance(a, ShapedVal) and a.row is not None:
            return a.row
    return None


def check_mix(args, at: str) -> None:
    from .shaped import ShapedVal
    for a in args:
        if isinstance(a, ShapedVal) and a.row is None:
            fail(at, f"a long row combines with scalars and other rows of its length, not "
                     f"with an element of shape {a.shape}", "shaped")


def entry(v) -> Scalar:
    return v.items[0]
