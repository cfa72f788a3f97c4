"""Running a long-row plan (rows.py): the numpy reference and the numba kernels of the cpu
backend. Both return raw = [result array] and one trace row."""
from __future__ import annotations

import time

import numpy as np

from ..backends.base import KernelRun, Prepared

_NP_REDUCE = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max,
              "and": np.all, "or": np.any}


def _column(kind: str, X: np.ndarray) -> np.ndarray:
    """X.<kind>(axis=0) with the query's dtypes (terminals.sum_dtype / mean_dtype)."""
    from ..errors import EmptySequenceError
    from ..graph.terminals import mean_dtype, sum_dtype
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
            from ..backends.reference.numpy_ref import _Eval
            ev = _Eval([X], params, plan.params, n)
            with np.errstate(all="ignore"):
                for st in plan.steps:
                    vals = np.broadcast_to(np.asarray(ev(st.entry), st.dtype), X.shape)
                    ev.vars[st.name] = _NP_REDUCE[st.op](vals, axis=1).astype(st.dtype)[:, None]
                out = np.broadcast_to(np.asarray(ev(plan.final), plan.final.dtype), (n, 1))
            out = np.ascontiguousarray(out.reshape(n))
        return [out], ((time.perf_counter() - t0) * 1e3, (1,))


class NumbaRows(_Rows):
    """Generated numba kernels (rows_numba.py), loaded through the cpu backend's numba loader
    (its disk cache); each flavour compiles, or loads from the cache, on its first call."""
    dialect = "numba"

    def __init__(self, plan):
        super().__init__(plan)
        from ..backends.cpu.rows_numba import compile_plan
        t0 = time.perf_counter()
        self.kernel = compile_plan(plan)
        self.compile_ms = (time.perf_counter() - t0) * 1e3

    def run_quick(self, inputs, params, n):
        t0 = time.perf_counter()
        X = inputs[0]
        if X.dtype == np.float16:            # held as float32 (exact), rounded as float16
            X = X.astype(np.float32)
        out, cache, compile_ms = self.kernel(X, *params)
        return [out], ((time.perf_counter() - t0) * 1e3 - compile_ms, (n,), cache, compile_ms)

    def trace_rows(self, row):
        ms, grid, cache, compile_ms = row
        return [KernelRun(self.name, self.dialect, grid, (), cache, compile_ms, ms)]
