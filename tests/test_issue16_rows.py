"""Issue 16 items 3-4: long rows (elements above shaped.MAX_SCALARS values, rows.py) on the
numpy and cpu backends: row reductions in a select (X.sum(axis=1), a stable logsumexp, norms)
and terminals across elements (X.sum(axis=0) ...), compared with NumPy's axis functions."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import querycompute as qc

BACKENDS = ["numpy", "cpu"]


def lse(r):
    return r.max() + np.log(np.exp(r - r.max()).sum())


ROW_FNS = [(lambda r: r.sum(), lambda X: X.sum(axis=1)),
           (lse, lambda X: X.max(axis=1) + np.log(np.exp(X - X.max(axis=1, keepdims=True)).sum(axis=1))),
           (lambda r: np.linalg.norm(r) + (r > 0).mean(), lambda X: np.linalg.norm(X, axis=1) + (X > 0).mean(axis=1))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(40, 10 ** 4), (3, 10 ** 5)])
def test_item3_row_reductions_long_rows(backend, shape):
    X = (np.random.default_rng(1).standard_normal(shape) * 50).astype(np.float32)
    for fn, ref in ROW_FNS:
        got = qc.query(X).on(backend).select(fn).to_array()
        want = ref(X.astype(np.float64))
        assert got.dtype == ref(X).dtype and np.isfinite(got).all()
        np.testing.assert_allclose(got, want, rtol=2e-5 if fn is lse else 1e-4)


@settings(max_examples=20, deadline=None)
@given(m=st.integers(0, 30), k=st.integers(65, 300), dtype=st.sampled_from(["float32", "float64", "int8", "float16"]),
       kind=st.sampled_from(["sum", "min", "max", "mean"]), order=st.sampled_from(["C", "F"]))
def test_item3_terminals_across_long_elements_numpy(m, k, dtype, kind, order):
    X = (np.random.default_rng(m * k).uniform(-3, 3, (m, k)) * 10).astype(dtype)
    X = np.asfortranarray(X) if order == "F" else X
    q = qc.query(X).on("numpy")
    if m == 0 and kind != "sum":
        with pytest.raises(qc.EmptySequenceError):
            getattr(q, kind)()
        return
    got = getattr(q, kind)()
    acc = "float32" if dtype == "float16" and kind in ("sum", "mean") else None
    want = getattr(X, kind)(axis=0, **({"dtype": acc} if acc else {})).astype(got.dtype)
    assert got.shape == (k,)
    np.testing.assert_allclose(got, want, rtol=1e-2 if dtype == "float16" else 1e-6)


@pytest.mark.parametrize("dtype, shapes", [("float32", [(3000, 100), (10, 20000), (0, 100)]),
                                           ("int8", [(1, 70)]), ("float16", [(3000, 100)])])
def test_item3_column_sums_cpu(dtype, shapes):
    for shape in shapes:         # (each element shape is one numba compile per terminal)
        X = (np.random.default_rng(2).uniform(-3, 3, shape) * 10).astype(dtype)
        q = qc.query(X).on("cpu")
        acc = "float32" if dtype == "float16" else None
        want = X.sum(axis=0, dtype=acc).astype(np.float16) if acc else X.sum(axis=0)
        got = q.sum()
        assert got.dtype == want.dtype and got.shape == (shape[1],)
        np.testing.assert_allclose(got, want, rtol=1e-2 if acc else 1e-5, atol=1e-3)
        if shape[0] and dtype == "float32":
            np.testing.assert_array_equal(q.max(), X.max(axis=0))


def test_item4_explain_and_errors():
    X = np.ones((4, 1000), np.float32)
    text = qc.query(X).select(lse).explain(backend="cpu")
    assert "row-per-iteration" in text and "4000 B/element" in text and "row1 = sum_j" in text
    assert "column-tiled" in qc.query(X).explain(backend="cpu", terminal="sum")
    src = qc.query(X).select(lse).source(backend="cpu")
    assert "prange" not in src and "def qc_rows(c0, c1, R, X, out)" in src     # run by morsels
    with pytest.raises(qc.QueryError, match="reduce each row"):
        qc.query(X).on("numpy").select(lambda r: r * 2).to_array()
    with pytest.raises(qc.QueryError, match="alone"):
        qc.query(X, X).on("numpy").select(lambda a, b: a @ b).to_array()
    with pytest.raises(qc.UnsupportedLambdaError, match="indexing a long row"):
        qc.query(X).on("numpy").select(lambda r: r[0]).to_array()
    # opencl/cuda: test_issue16_gpu_rows.py; webgpu: test_issue16_wgsl_rows.py; metal has none
    with pytest.raises(qc.BackendUnavailableError, match="not built yet"):
        qc.query(X).lowered("sum")[0].row_plan.prepare("metal")
