"""Issue 16 item 4 on webgpu: long rows run as WGSL kernels printed from the same kernel IR as
the OpenCL / CUDA / Metal ones (ops/rows/gpu.py, backends/gpu_rows.py on
webgpu_stages.WebGPUStages): one work-group per row with a block tree (row sums, the
logsumexp row-step chain) and the tiled column reductions X.<op>(axis=0). Compared with
NumPy's own axis functions; a 64-bit value (NumPy's int64 sum of int32 rows) is refused with
the type and the reason named (WGSL has no 64-bit types), never truncated."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute.errors import EmptySequenceError, UnsupportedTypeError

pytestmark = pytest.mark.skipif(not qc.backends()["webgpu"]["available"],
                                reason=str(qc.backends()["webgpu"].get("reason", "no webgpu adapter")))


@pytest.fixture(autouse=True)
def kernels_answer(monkeypatch):
    monkeypatch.setenv("QUERYCOMPUTE_TIERED", "0")        # the WGSL kernels answer, not the numpy tier


def data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        return rng.integers(-50, 50, shape).astype(dtype)
    return (rng.standard_normal(shape) * 3).astype(dtype)


def logsumexp(r):
    return r.max() + np.log(np.exp(r - r.max()).sum())


def close(got, want, dtype):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    tol = {"float16": 2e-2, "float32": 2e-4}.get(str(np.dtype(dtype)), 0)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10)


def webgpu_kernels() -> set:
    return {k.name for k in qc.last_trace().kernels if k.dialect == "webgpu"}


@pytest.mark.parametrize("shape", [(5, 1000), (1, 10_000), (0, 300)])
def test_item4_webgpu_row_reductions_equal_numpy(shape):
    for dtype in ("float32", "float16"):
        X = data(shape, dtype)
        got = qc.query(X).select(logsumexp).on("webgpu").to_array()
        X32 = X.astype(np.float32)
        want = (X32.max(axis=1) + np.log(np.exp(X32 - X32.max(axis=1, keepdims=True)).sum(axis=1))).astype(dtype)
        close(got, want, dtype)
        assert shape[0] == 0 or webgpu_kernels() == {"qc_rows"}, qc.last_trace()
        got = qc.query(X).select(lambda r: r.sum()).on("webgpu").to_array()
        close(got, X.sum(axis=1, dtype=np.float32).astype(dtype), dtype)


@pytest.mark.parametrize("shape", [(700, 130), (3, 1000), (0, 300)])
def test_item4_webgpu_column_reductions_equal_numpy(shape):
    X = data(shape, "float32", 1)
    if shape[0]:
        X[min(2, shape[0] - 1), 7] = np.nan                 # max keeps NaN, as np.max
    for kind in ("sum", "max", "mean"):
        q = qc.query(X).on("webgpu")
        if shape[0] == 0 and kind != "sum":
            with pytest.raises(EmptySequenceError):
                getattr(q, kind)()
            continue
        got = getattr(q, kind)()
        close(got, getattr(X, kind)(axis=0), "float32")
        assert shape[0] == 0 or webgpu_kernels() == {"qc_cols_partials", "qc_cols_combine"}


def test_item4_webgpu_int32_max_runs_and_64_bit_sums_are_refused():
    Xi = data((300, 200), "int32", 2)
    assert np.array_equal(qc.query(Xi).on("webgpu").max(), Xi.max(axis=0))
    with pytest.raises(UnsupportedTypeError, match=r"int64.*accumulator.*WGSL has no 64-bit types"):
        qc.query(Xi).on("webgpu").sum()                    # NumPy sums int32 in int64
    with pytest.raises(UnsupportedTypeError, match=r"int64.*WGSL has no 64-bit types"):
        qc.query(Xi).select(lambda r: r.sum()).on("webgpu").to_array()


def test_item4_webgpu_rows_explain_and_source():
    X = data((3, 1000), "float32")
    text = qc.query(X).select(logsumexp).explain("webgpu")
    assert "one work-group per row" in text and "8 B per element (4 B x 2 step(s))" in text, text
    assert "tiled" in qc.query(X).explain("webgpu", "sum")
    src = qc.query(X).select(logsumexp).source("webgpu")
    assert "@compute @workgroup_size(256)" in src and "workgroupBarrier()" in src, src
