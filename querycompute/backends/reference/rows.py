"""Running a long-row plan (plan/rows.py) on the numpy reference: NumpyRows, one NumPy axis=1
reduction of the whole array per row step, and `_column`, the column-tiled reductions' result
dtypes, which the cpu (rows_numba.NumbaRows) and GPU (gpu_rows.py) runs follow too. A run
returns raw = [result array] and one trace row."""
from __future__ import annotations

import time

import numpy as np

from querycompute._codegen.dtypes import mean_dtype, sum_dtype
from querycompute._codegen.numpy_eval import Eval

from ..base import KernelRun, Prepared
from ...errors import EmptySequenceError

_NP_REDUCE = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max,
              "and": np.all, "or": np.any}


def _column(kind: str, X: np.ndarray) -> np.ndarray:
    """X.<kind>(axis=0) with the query's dtypes (_codegen/dtypes.sum_dtype / mean_dtype)."""
    d = X.dtype.name
    if kind in ("min", "max", "mean") and len(X) == 0:
        raise EmptySequenceError(f"{kind} of an empty sequence (no element survived)")
    if kind in ("min", "max"):
        return (X.min if kind == "min" else X.max)(axis=0)
    acc, res = mean_dtype(d) if kind == "mean" else sum_dtype(d)
    total = X.sum(axis=0, dtype=acc)
    if kind == "mean":
        total = total / np.array(len(X), acc)
    return total.astype(res)


class _Rows(Prepared):
    name = "qc_rows"
    dialect = "numpy"

    def __init__(self, plan):
        self.plan = plan

    def trace_rows(self, row):
        ms, grid = row
        return [KernelRun(self.name, self.dialect, grid, (), "", 0.0, ms)]


class NumpyRows(_Rows):
    """The reference: every row step is one NumPy axis=1 reduction of the whole array."""

    def run_quick(self, inputs, params, n):
        t0 = time.perf_counter()
        X = inputs[0]
        plan = self.plan
        if plan.strategy == "column-tiled":
            out = _column(plan.column_kind, X)
        else:
            ev = Eval([X], params, plan.params, n)
            with np.errstate(all="ignore"):
                for st in plan.steps:
                    vals = np.broadcast_to(np.asarray(ev(st.entry), st.dtype), X.shape)
                    ev.vars[st.name] = _NP_REDUCE[st.op](vals, axis=1).astype(st.dtype)[:, None]
                out = np.broadcast_to(np.asarray(ev(plan.final), plan.final.dtype), (n, 1))
            out = np.ascontiguousarray(out.reshape(n))
        return [out], ((time.perf_counter() - t0) * 1e3, (1,))
