"""The cpu runtime of long rows (plan/rows.py): a row plan's numba module (printed by
_codegen/ops/rows/cpu.py, whose docstring explains the kernels) compiled once per plan and
loaded through the cpu backend's one numba loader, so a new process loads it from the disk
cache (numba_loader.py); inputs below `parallel_min(plan)` values run the serial entry point.
column-tiled: rows_columns.py's kernel (the cpu backend's one column reduction).
"""
from __future__ import annotations

import time

import numpy as np

from querycompute._codegen.dtypes import mean_dtype, sum_dtype
from querycompute._codegen.ops.rows.cpu import row_source

from ..base import KernelRun
from ..reference.rows import _Rows, _column
from .numba_loader import load

# Inputs of this many values and more run the parallel kernel (rows in prange) when a row
# step calls a function (exp: ~1 ns per value on one core); plain sums, min and max are
# memory-bound like rows_columns' column sums and use its threshold (parallel_min).
ROWS_PARALLEL_MIN = 1 << 20


def parallel_min(plan) -> int:
    """Values from which a row plan runs in parallel: ROWS_PARALLEL_MIN when a step calls a
    function (exp, log ...: compute-bound), else rows_columns.PARALLEL_MIN (a plain sum / min
    / max streams memory, which one core already saturates here)."""
    from querycompute._codegen.ir import expr as E

    from .rows_columns import PARALLEL_MIN
    heavy = any(isinstance(n, E.Call) for st in plan.steps for n in E.walk(st.entry))
    return ROWS_PARALLEL_MIN if heavy else PARALLEL_MIN


def compile_plan(plan):
    """A function X, *params -> (the plan's result array, cache origin, compile ms): the
    plan's kernels loaded through the cpu backend's one numba loader and its disk cache
    (numba_loader.py); numba compiles each flavour, or loads it from the cache, on its first
    call, which the origin and compile ms of that call say."""
    from .cpu import launch
    if plan.strategy != "column-tiled":
        mod = load("qc_rows", row_source(plan))
        least = parallel_min(plan)

        def rows(X, *p):
            _, (out, cache, compile_ms, _) = launch(
                X.size >= least, lambda par: mod.call("qc_rows" if par else "qc_rows_serial", X, *p))
            return (out.astype(np.float16) if plan.final.dtype == "float16" else out), cache, compile_ms
        return rows
    kind = plan.column_kind

    def columns(X):                 # rows_columns.py: tiles of row chunks x column blocks
        if len(X) == 0:
            return _column(kind, np.zeros((0, X.shape[1]), X.dtype)), "memory", 0.0
        from .rows_columns import reduce_columns, wants_parallel
        op = "sum" if kind == "mean" else kind
        _, (res, cache, compile_ms) = launch(bool(wants_parallel(*X.shape)),
                                             lambda par: reduce_columns(X, (op,), par))
        res = res[op]
        if kind == "mean":
            acc, out = mean_dtype(plan.dtype)
            res = (res.astype(acc) / np.array(len(X), acc)).astype(out)
        elif kind == "sum":
            res = res.astype(sum_dtype(plan.dtype)[1], copy=False)
        else:
            res = res.astype(plan.dtype, copy=False)
        return res, cache, compile_ms
    return columns


class NumbaRows(_Rows):
    """Generated numba kernels (rows_numba.py), loaded through the cpu backend's numba loader
    (its disk cache); each flavour compiles, or loads from the cache, on its first call."""
    dialect = "numba"

    def __init__(self, plan):
        super().__init__(plan)
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
