"""The cpu runtime of long rows (plan/rows.py): a row plan's numba module (printed by
_codegen/ops/rows/cpu.py, whose docstring explains the kernel) compiled once per plan and
loaded through the cpu backend's one numba loader, so a new process loads it from the disk
cache (numba_loader.py). Its one entry point runs over units of rows (about CHUNK values
each) through the cpu backend's morsel scheduler (morsels.py), as a fused pass's steps do:
one call on this thread for a small input, else morsels on the cores.
column-tiled: rows_columns.py's kernel (the cpu backend's one column reduction).
"""
from __future__ import annotations

import time

import numpy as np

from querycompute._codegen.dtypes import mean_dtype, sum_dtype
from querycompute._codegen.ops.rows.cpu import out_dtype, row_source
from querycompute._codegen.sum_order import CHUNK

from . import cpu as _cpu
from ..base import KernelRun
from ..reference.rows import _Rows, _column
from .numba_loader import load


def row_units(m: int, k: int) -> tuple[int, int]:
    """(rows per unit, units) of an (m, k) input: about CHUNK values per unit (one row at
    least), the unit of the morsel scheduler's ranges. Each row is computed by one call
    whatever the units, so they never change a bit."""
    per = max(1, CHUNK // max(1, k))
    return per, -(-m // per)


def compile_plan(plan):
    """A function X, *params -> (the plan's result array, cache origin, compile ms, grid,
    morsels): the plan's kernel loaded through the cpu backend's one numba loader and its
    disk cache (numba_loader.py); numba compiles it, or loads it from the cache, on its first
    call (for the input's layout), which the origin and compile ms of that call say."""
    if plan.strategy != "column-tiled":
        mod = load("qc_rows", row_source(plan))
        dtype = out_dtype(plan)

        def rows(X, *p):
            m, k = X.shape
            per, units = row_units(m, k)
            out = np.empty(m, dtype)
            args = (per, X, out, *p)
            _, cache, compile_ms, _ = mod.call(
                "qc_rows", runner=lambda entry: _cpu._run_morsels(entry, units, args))
            res = out.astype(np.float16) if plan.final.dtype == "float16" else out
            return res, cache, compile_ms, (units,), _cpu._in_morsels(units)
        return rows
    kind = plan.column_kind

    def columns(X):                 # rows_columns.py: tiles of row chunks x column blocks
        if len(X) == 0:
            return _column(kind, np.zeros((0, X.shape[1]), X.dtype)), "memory", 0.0, (0,), 1
        from .rows_columns import grid, in_morsels, reduce_columns
        op = "sum" if kind == "mean" else kind
        res, cache, compile_ms = reduce_columns(X, (op,))
        res = res[op]
        if kind == "mean":
            acc, out = mean_dtype(plan.dtype)
            res = (res.astype(acc) / np.array(len(X), acc)).astype(out)
        elif kind == "sum":
            res = res.astype(sum_dtype(plan.dtype)[1], copy=False)
        else:
            res = res.astype(plan.dtype, copy=False)
        return res, cache, compile_ms, (grid(*X.shape)[3],), in_morsels(*X.shape)
    return columns


class NumbaRows(_Rows):
    """Generated numba kernels (rows_numba.py), loaded through the cpu backend's numba loader
    (its disk cache); a kernel compiles, or loads from the cache, on its first call. A run's
    trace row is named qc_rows_inline or qc_rows_morsels (one call on this thread, or
    morsels on the cores); its grid is the units (row plans) or tiles (column-tiled)."""
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
        out, cache, compile_ms, grid, morsels = self.kernel(X, *params)
        return [out], ((time.perf_counter() - t0) * 1e3 - compile_ms, grid, cache, compile_ms, morsels)

    def trace_rows(self, row):
        ms, grid, cache, compile_ms, morsels = row
        kind = "inline" if morsels == 1 else "morsels"
        return [KernelRun(f"{self.name}_{kind}", self.dialect, grid, (), cache, compile_ms, ms)]
