"""Issue 16: shaped elements (DESIGN.md sections 3 and 4b) on the numpy and cpu backends.

Every lambda is checked against plain NumPy evaluating the same lambda on each element
(X[i], a NumPy array), and terminals against NumPy's axis functions. Hypothesis draws element
shapes (1..8 per axis), dtypes, orders and strides on the numpy backend (no compilation);
the cpu backend runs a fixed set of shapes (each shape is one numba compile).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import querycompute as qc

VEC_FNS = [
    lambda r: r * 2 + 1,
    lambda r: r.sum(),
    lambda r: r.max(),
    lambda r: r.min(),
    lambda r: r.mean(),
    lambda r: r.prod(),
    lambda r: r.argmax(),
    lambda r: r.argmin(),
    lambda r: r.any(),
    lambda r: r.all(),
    lambda r: (r > r.mean()).sum(),
    lambda r: r[-1] + len(r) - r[0],
    lambda r: np.dot(r, r),
    lambda r: r @ r,
    lambda r: np.maximum(r, r[0]) - np.abs(r),
    lambda r: np.array([r[0], r[-1]]) * r.shape[0],
    lambda r: np.sum(r[::2]) + np.max(r[1:] if len(r) > 1 else r),
]
FLOAT_VEC_FNS = [
    lambda r: np.linalg.norm(r),
    lambda r: r.max() + np.log(np.exp(r - r.max()).sum()),
    lambda r: np.sqrt(np.abs(r)).astype(np.float64) / (1 + r * r),
]
MAT_FNS = [
    lambda m: m.sum(axis=0),
    lambda m: m.sum(axis=1),
    lambda m: m.max(axis=-1),
    lambda m: m.min(axis=0) + m.mean(),
    lambda m: m.argmax(axis=0),
    lambda m: m.T @ m,
    lambda m: m @ m[0],
    lambda m: m.T[0] * 2,
    lambda m: m[0, -1] + m[-1, 0],
    lambda m: np.sum(m, axis=(0, 1)),
    lambda m: m.prod(axis=1),
    lambda m: (m > 0).any(axis=0),
    lambda m: m.ravel()[1:] if m.size > 1 else m.ravel(),
]
DTYPES = ["float32", "float64", "int32", "int8", "uint16", "float16", "bool"]


def make(shape, dtype, order="C", seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        x = rng.random(shape) > 0.5
    elif np.dtype(dtype).kind == "f":
        x = rng.uniform(-2, 2, shape).astype(dtype)
    else:
        x = rng.integers(0, 4, shape).astype(dtype)
    return np.asfortranarray(x) if order == "F" else np.ascontiguousarray(x)


def per_element(fn, X):
    """The oracle: NumPy evaluating fn on each element."""
    with np.errstate(all="ignore"):
        return np.array([fn(X[i]) for i in range(len(X))])


def check(fn, X, backend, oracle=None):
    want = per_element(fn, X) if oracle is None else oracle
    try:
        with np.errstate(all="ignore"):
            got = qc.query(X).select(fn).on(backend).to_array()
    except qc.UnsupportedLambdaError:
        with pytest.raises(Exception):        # only where NumPy itself refuses
            per_element(fn, X)
        return
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if want.dtype.kind == "f":
        tol = 2e-2 if want.dtype == np.float16 else 2e-5 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


def _numpy_refuses(fn, X):
    try:
        per_element(fn, X[:1])
    except Exception:
        return True
    return False


@settings(max_examples=30, deadline=None)
@given(k=st.integers(1, 8), dtype=st.sampled_from(DTYPES), stride=st.sampled_from([1, 2]),
       n=st.integers(1, 9), which=st.integers(0, len(VEC_FNS) + len(FLOAT_VEC_FNS) - 1))
def test_item2_vector_lambdas_match_numpy_per_element(k, dtype, stride, n, which):
    fns = VEC_FNS + FLOAT_VEC_FNS
    fn = fns[which]
    if which >= len(VEC_FNS) and np.dtype(dtype).kind != "f":
        dtype = "float32"
    X = make((n, k * stride), dtype)[:, ::stride]          # strided element components
    if _numpy_refuses(fn, X):
        with pytest.raises(Exception):
            qc.query(X).select(fn).on("numpy").to_array()
        return
    check(fn, X, "numpy")


@settings(max_examples=30, deadline=None)
@given(a=st.integers(1, 8), b=st.integers(1, 8), dtype=st.sampled_from(DTYPES),
       order=st.sampled_from(["C", "F"]), n=st.integers(1, 7), which=st.integers(0, len(MAT_FNS) - 1))
def test_item2_matrix_lambdas_match_numpy_per_element(a, b, dtype, order, n, which):
    fn = MAT_FNS[which]
    X = make((n, a, b), dtype, order)
    if _numpy_refuses(fn, X):
        with pytest.raises(Exception):
            qc.query(X).select(fn).on("numpy").to_array()
        return
    check(fn, X, "numpy")


def test_item2_one_element_of_64_scalars():
    X = make((5, 8, 8), "float32", seed=3)
    for fn in (MAT_FNS[0], MAT_FNS[5], lambda m: m.max() + np.log(np.exp(m - m.max()).sum())):
        check(fn, X, "numpy")


# --- cpu (numba): a fixed set of shapes, a few compilations -----------------------------------
@pytest.mark.parametrize("shape, fn", [
    ((3,), VEC_FNS[12]), ((5,), FLOAT_VEC_FNS[1]), ((4,), VEC_FNS[6]),
    ((3, 3), MAT_FNS[5]), ((2, 4), MAT_FNS[1]),
])
def test_item2_cpu_matches_numpy_per_element(shape, fn):
    X = make((37,) + shape, "float32", order="F", seed=1)
    check(fn, X, "cpu")


def test_item2_elementwise_math_casts_cross_and_builders():
    X = make((20, 3), "float32", seed=2)
    Y = make((20, 3), "float32", seed=4)
    fns = [lambda a, b: np.cross(a, b), lambda a, b: np.float64(a) * b[1],
           lambda a, b: np.array((a.sum(), b.sum(), 1.0)), lambda a, b: a if a[0] > b[0] else -b,
           lambda a, b: np.minimum(a, b) + (1, 2, 3)]
    for fn in fns:
        got = qc.query(X, Y).select(fn).on("numpy").to_array()
        np.testing.assert_allclose(got, np.array([fn(X[i], Y[i]) for i in range(20)]), rtol=1e-6)


def test_item2_errors_name_construct_and_place():
    X = make((4, 3), "float32")
    cases = [(lambda r: r[r[0]], "constants only"), (lambda r: r + np.ones(2), "CAPTURED"),
             (lambda r: math.sqrt(r), "scalars"), (lambda r: r.cumsum(), "cumsum"),
             (lambda r: 1 if r > 0 else 0, "truth value"), (lambda r: r @ r[:2], "align"),
             (lambda r: np.cross(r[:2], r[:2]), "3-vectors"), (lambda r: r[5], "index")]
    for fn, words in cases:
        with pytest.raises(qc.UnsupportedLambdaError) as e:
            qc.query(X).select(fn).on("numpy").to_array()
        msg = str(e.value)
        assert "test_issue16_shaped.py:" in msg, msg
        if words != "CAPTURED":
            assert words in msg, msg


# --- item 1: sources -------------------------------------------------------------------------
def test_item1_orders_strides_zips_and_tables():
    base = make((30, 3, 3), "float64", seed=5)
    views = [base, np.asfortranarray(base), base.transpose(0, 2, 1), base[::2], base[:, ::-1, :]]
    x = make((30, 6), "float64", seed=6)[:, ::2]
    for R in views:
        n = len(R)
        got = qc.query(R, x[:n]).select(lambda R, v: R @ v).on("numpy").to_array()
        np.testing.assert_allclose(got, np.einsum("nij,nj->ni", R, x[:n]), rtol=1e-12)
    w = np.arange(30.0)
    got = qc.query(m=base, w=w).select(lambda r: r.m.sum(axis=1) * r.w).on("numpy").to_array()
    np.testing.assert_allclose(got, base.sum(axis=2) * w[:, None])
    got = qc.query({"m": base, "w": w}).where(lambda r: r.w > 10).select(lambda r: r.m).on("numpy").to_array()
    np.testing.assert_array_equal(got, base[w > 10])


def test_item1_errors():
    with pytest.raises(ValueError, match="equal lengths"):
        qc.query(np.zeros((3, 3)), np.zeros(4))
    with pytest.raises(qc.QueryError, match="64"):
        qc.query(np.zeros((3, 9, 9)))            # matrices above 64 values (rows: rows.py)
    with pytest.raises(TypeError, match="3 dimensions"):
        qc.query(np.zeros((3, 2, 2, 2)))
    with pytest.raises(TypeError, match="complex"):
        qc.query(np.zeros((3, 2), np.complex64))


# --- item 3: terminals act elementwise across elements --------------------------------------
@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_item3_terminals_elementwise(backend):
    X = make((41, 4), "float32", seed=7)
    q = qc.query(X).on(backend)
    np.testing.assert_allclose(q.sum(), X.sum(axis=0), rtol=1e-5)
    assert q.sum().dtype == np.float32 and q.sum().shape == (4,)
    np.testing.assert_array_equal(q.min(), X.min(axis=0))
    np.testing.assert_array_equal(q.max(), X.max(axis=0))
    np.testing.assert_allclose(q.mean(), X.mean(axis=0), rtol=1e-5)
    got = q.agg(s=qc.sum, hi=qc.max, c=qc.count)
    np.testing.assert_allclose(got["s"], X.sum(axis=0), rtol=1e-5)
    assert got["c"] == 41
    kept = q.where(lambda r: r.max() > 1).to_array()
    np.testing.assert_array_equal(kept, X[X.max(axis=1) > 1])
    np.testing.assert_array_equal(q.where(lambda r: r[1] < 0).first(), X[X[:, 1] < 0][0])
    np.testing.assert_allclose(q.select(lambda r: r.sum()).to_array(), X.sum(axis=1), rtol=1e-5)
    assert q.to_list() == X.tolist()
    I8 = make((9, 2, 2), "int8", seed=8)
    np.testing.assert_array_equal(qc.query(I8).on(backend).sum(), I8.sum(axis=0))


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_item3_empty_and_one(backend):
    E = np.zeros((0, 3), np.float32)
    q = qc.query(E).on(backend)
    assert q.to_array().shape == (0, 3)
    np.testing.assert_array_equal(q.sum(), E.sum(axis=0))
    with pytest.raises(qc.EmptySequenceError):
        q.min()
    one = make((1, 3, 3), "float64", seed=9)
    np.testing.assert_allclose(qc.query(one).on(backend).select(lambda m: m @ m).to_array(), one @ one)


def test_item3_logsumexp_is_stable():
    X = make((25, 6), "float64", seed=10) * 400 + 1000        # exp overflows without the shift
    want = X.max(axis=1) + np.log(np.exp(X - X.max(axis=1, keepdims=True)).sum(axis=1))
    for backend in ("numpy", "cpu"):
        got = qc.query(X).on(backend).select(lambda r: r.max() + np.log(np.exp(r - r.max()).sum())).to_array()
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_item4_explain_states_strategy_and_bytes():
    R = make((10, 3, 3), "float32")
    text = qc.query(R).select(lambda m: m.sum()).explain(backend="numpy")
    assert "scalarized" in text and "36 B/element" in text


def test_item7_example_rigid_transform():
    import pathlib
    import subprocess
    import sys
    path = pathlib.Path(__file__).parent.parent / "examples" / "rigid_transform.py"
    out = subprocess.run([sys.executable, str(path), "--n", "20000"], capture_output=True,
                         text=True, check=True).stdout
    line = [ln for ln in out.splitlines() if ln.startswith("max abs difference vs einsum:")]
    assert len(line) == 1, out
    assert float(line[0].split(":")[1]) < 1e-4
    assert "shape: (20000, 3)" in out


def test_item7_guide_section_runs(tmp_path):
    """docs/guide.md "Shaped elements": every block runs as written (saved as a file)."""
    import pathlib
    import re
    import runpy
    text = (pathlib.Path(__file__).parent.parent / "docs" / "guide.md").read_text()
    start = text.index("## Shaped elements")
    blocks = re.findall(r"```python\n(.*?)```", text[start:text.index("\n## ", start + 3)], re.S)
    assert len(blocks) == 3           # rigid transform, long rows, the GPU strategy in explain()
    for i, code in enumerate(blocks):
        path = tmp_path / f"shaped_{i}.py"
        path.write_text(code)
        runpy.run_path(str(path))
