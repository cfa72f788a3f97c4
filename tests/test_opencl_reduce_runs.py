"""Stage 1 of a reduction walks the input in runs of `elems_per_thread` consecutive elements
per thread, a whole grid of runs per grid-stride step (codegen/lower_element.py
grid_stride_runs). These sizes exceed one step of the capped grid, so threads fold several
runs and the last run stops short at n; generated OpenCL runs on pocl and is compared with
NumPy: exact for integers, first-survivor and NaN semantics, bit-identical on a rerun."""
from __future__ import annotations

import numpy as np
import pytest

from querycompute._codegen.ir import expr as E
from querycompute._codegen.ir import program as P
from querycompute._codegen.launch import BLOCK, MAX_REDUCE_BLOCKS
from querycompute._codegen.lower.element import elems_per_thread

import gpu_passes as G


def one_step(dtype: str) -> int:
    """Elements the capped stage-1 grid covers in one grid-stride step."""
    return MAX_REDUCE_BLOCKS * BLOCK * elems_per_thread([dtype])


def run(ocl, p: P.Pass, x, params=()):
    return ocl.prepare(p).run_quick([x], list(params), len(x))[0]


@pytest.mark.parametrize("dtype", ["int16", "int32"])
def test_filtered_aggs_over_several_steps_match_numpy(ocl, dtype):
    step = one_step(dtype)
    n = 2 * step + 5                         # three steps; the last one ends mid-run
    rng = np.random.default_rng(11)
    x = rng.integers(-100, 0, n).astype(dtype)               # dropped by x > 0
    # survivors only from inside a run of the second step on, and the very last element
    keep_at = np.unique(np.concatenate([rng.integers(step + 3, n, 500), [n - 1]]))
    x[keep_at] = rng.integers(1, 1000, len(keep_at)).astype(dtype)
    x[keep_at[-2]] = 1000                                  # the max sits in a late run
    p = P.Pass(G.filter_program(dtype), P.Reduce(G.reduce_aggs(dtype)), f"qc_runs_{dtype}")
    total, count, (first, values), anyv, allv, mn, mx, fold = run(ocl, p, x, [np.dtype(dtype).type(0)])
    kept = x[keep_at]
    assert total == kept.astype(np.int64).sum() and count == len(keep_at)
    assert first == keep_at[0] and values == (x[first], x[first] + x[first])
    assert anyv is True and allv is True
    assert (mn, mx, fold) == (kept.min(), 1000, 1000)


def test_nan_in_the_last_partial_run_propagates_and_sums_repeat_bit_for_bit(ocl):
    dtype = "float64"
    x = E.Load(0, dtype)
    aggs = (P.Agg("min", (x,), dtype), P.Agg("max", (x,), dtype), P.Agg("sum", (x,), dtype))
    p = P.Pass(P.ElementProgram((P.InputSpec("x", dtype),), (), (), ()), P.Reduce(aggs), "qc_runs_nan")
    n = 2 * one_step(dtype) + 1
    data = np.random.default_rng(5).standard_normal(n) * 1e3
    mn, mx, total = run(ocl, p, data)
    assert mn == data.min() and mx == data.max()
    assert abs(total - data.sum()) <= 1e-12 * np.abs(data).sum()
    again = run(ocl, p, data)[2]
    assert np.float64(total).tobytes() == np.float64(again).tobytes()
    data[-1] = np.nan
    mn, mx, _ = run(ocl, p, data)
    assert np.isnan(mn) and np.isnan(mx)


def test_strided_input_over_several_steps(ocl):
    dtype = "int32"
    base = np.arange(3 * (one_step(dtype) + 7), dtype=dtype) % 1000 - 500
    view = base[::3]
    p = P.Pass(G.filter_program(dtype), P.Reduce(G.reduce_aggs(dtype)), "qc_runs_strided")
    total, count, (first, _), *_ = run(ocl, p, view, [np.int32(0)])
    kept = view[view > 0]
    assert total == kept.astype(np.int64).sum() and count == len(kept)
    assert first == int(np.flatnonzero(view > 0)[0])
