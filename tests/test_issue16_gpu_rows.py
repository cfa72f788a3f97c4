"""Issue 16 item 4: GPU kernels for long rows (ops/rows/gpu.py, backends/gpu_rows.py):
one work-group per row with a block tree (row reductions, the logsumexp row-step chain) and
tiled column reductions (X.<op>(axis=0)), on OpenCL (pocl), through the CPU harness for CUDA
C and MSL, and the NVRTC / Metal compile checks. Compared with NumPy's own axis functions."""
from __future__ import annotations

import numpy as np
import pytest
from compile_checks import ARCHS, metal_compiles, ptx_of

import querycompute as qc
from querycompute.backends.gpu.gpu_rows import GpuRows
from querycompute.backends.gpu.gpu_stages import GpuStages
from querycompute.errors import EmptySequenceError

SHAPES = [(3, 1000), (1, 10_000), (0, 300)]     # a few rows of 1e3; n = 1 of 1e4; empty


def row_sum(r):
    return r.sum()


def logsumexp(r):
    return r.max() + np.log(np.exp(r - r.max()).sum())


def row_min(r):
    return r.min()


def data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 3
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-50 if np.dtype(dtype).kind == "i" else 0, 50, shape).astype(dtype)
    return x.astype(dtype)


def rows_plan(X, fn=None, terminal="to_array"):
    q = qc.query(X) if fn is None else qc.query(X).select(fn)
    return q.lowered(terminal)[0].row_plan


def numpy_answer(X, fn, terminal):
    q = qc.query(X) if fn is None else qc.query(X).select(fn)
    return getattr(q.on("numpy"), terminal)()


def close(got, want, dtype):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    tol = {"float16": 2e-2, "float32": 2e-4}.get(str(np.dtype(dtype)), 1e-9)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10)
    else:
        assert np.array_equal(got, want)


# ---- OpenCL (pocl): through the query layer ----------------------------------------------------------
@pytest.fixture(scope="module")
def opencl(ocl, monkeypatch_module):
    monkeypatch_module.setenv("QUERYCOMPUTE_TIERED", "0")       # the opencl kernels answer, not the numpy tier
    return ocl


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


@pytest.mark.parametrize("shape", SHAPES)
def test_item4_opencl_row_reductions_equal_numpy(opencl, shape):
    for dtype in ("float32", "float16"):
        X = data(shape, dtype)
        for fn in (row_sum, logsumexp):
            got = qc.query(X).select(fn).on("opencl").to_array()
            trace = qc.last_trace()
            close(got, numpy_answer(X, fn, "to_array"), dtype)
            assert shape[0] == 0 or any(k.dialect == "opencl" for k in trace.kernels), trace
            again = qc.query(X).select(fn).on("opencl").to_array()
            assert np.asarray(again).tobytes() == np.asarray(got).tobytes()     # run to run


def test_item4_opencl_row_min_keeps_nan_and_int_rows(opencl):
    X = data((4, 2000), "float32")
    X[1, 1234] = np.nan
    got = qc.query(X).select(row_min).on("opencl").to_array()
    close(got, X.min(axis=1), "float32")
    Xi = data((3, 1500), "int32", 1)
    assert np.array_equal(qc.query(Xi).select(row_sum).on("opencl").to_array(), Xi.sum(axis=1))


@pytest.mark.parametrize("shape", SHAPES)
def test_item4_opencl_column_reductions_equal_numpy(opencl, shape):
    for dtype, kinds in (("float32", ("sum", "max", "mean")), ("int32", ("sum", "min"))):
        X = data(shape, dtype)
        for kind in kinds:
            q = qc.query(X).on("opencl")
            if shape[0] == 0 and kind != "sum":
                with pytest.raises(EmptySequenceError):
                    getattr(q, kind)()
                continue
            got = getattr(q, kind)()
            close(got, numpy_answer(X, None, kind), dtype)
            assert np.asarray(getattr(q, kind)()).tobytes() == np.asarray(got).tobytes()


def test_item4_opencl_column_sum_float16_and_nan(opencl):
    for shape in ((700, 130), (2500, 100)):          # 11 and 32 (all) row chunks
        X = data(shape, "float16")
        # float32 accumulation, as the numpy backend (X.sum(axis=0) itself rounds every add to float16)
        close(qc.query(X).on("opencl").sum(), X.sum(axis=0, dtype=np.float32).astype(np.float16), "float16")
    Y = data((300, 200), "float32")
    Y[17, 5] = np.nan
    close(qc.query(Y).on("opencl").max(), Y.max(axis=0), "float32")


def test_item4_explain_states_strategy_and_bytes():
    X = data((3, 1000), "float32")
    text = qc.query(X).select(logsumexp).explain("opencl")
    assert "one work-group per row" in text and "8 B per element (4 B x 2 step(s))" in text, text
    text = qc.query(X).explain("cuda", "sum")
    assert "tiled" in text and "4 B per element" in text, text
    assert "__global__" in qc.query(X).select(logsumexp).source("cuda")     # needs no device


# ---- CUDA C and MSL through the CPU harness --------------------------------------------------------
def harness_stages(dialect: str, sets) -> GpuStages:
    harness = pytest.importorskip("harness.plans")
    ok, why = harness.runner.available()
    if not ok:
        pytest.skip(why)
    module = harness.module_for(sets)
    return GpuStages(dialect, lambda ks: (harness.HarnessRuntime(ks, module), "compiled", 0.0))


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_item4_harness_rows_and_columns(dialect):
    """One g++ build per dialect: logsumexp rows and the column sum, n = 1, several rows, empty."""
    X = data((3, 1000), "float32")
    plans = [rows_plan(X, logsumexp), rows_plan(X, None, "sum")]
    stub = GpuStages(dialect, None)
    sets = [GpuRows(p, stub).kernel_set() for p in plans]
    stages = harness_stages(dialect, sets)
    rows_k, cols_k = (GpuRows(p, stages) for p in plans)
    # kernel sets are rendered once per GpuRows; the harness module already holds them
    for shape in [(3, 1000), (1, 1000), (0, 1000)]:
        Y = data(shape, "float32", 2)
        got = rows_k.run_quick([Y], [], len(Y))[0][0]
        close(got, numpy_answer(Y, logsumexp, "to_array"), "float32")
    for shape in [(700, 130), (1, 300)]:              # 11 row chunks; 1
        Y = data(shape, "float32", 3)
        got = cols_k.run_quick([Y], [], len(Y))[0][0]
        close(got, Y.sum(axis=0), "float32")


# ---- compile checks ----------------------------------------------------------------------------------
def every_set(dialect: str) -> list:
    X = data((2, 1000), "float32")
    H = data((2, 1000), "float16")
    stub = GpuStages(dialect, None)
    plans = [rows_plan(X, logsumexp), rows_plan(H, row_sum), rows_plan(X, None, "mean"),
             rows_plan(H, None, "max"), rows_plan(data((2, 100), "int32"), None, "sum")]
    return [GpuRows(p, stub).kernel_set() for p in plans]


def test_item4_rows_kernels_compile_with_nvrtc():
    for ks in every_set("cuda"):
        for arch in ARCHS:
            ptx_of(ks, arch, "rows.cu")


def test_item4_rows_kernels_pass_the_metal_compile_check(tmp_path):
    for i, ks in enumerate(every_set("metal")):
        metal_compiles(ks.source, tmp_path, f"rows{i}")
