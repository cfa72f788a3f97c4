"""Issue 16 item 5: hypothesis over shaped elements on every backend.

Element shapes 1..64 per axis (vectors of 1..64; matrices a x b up to shaped.MAX_SCALARS
values, above which matrices are refused with the limit named), rows of 1e4 and 1e5 values
(the long-row strategies), the dtypes float32/float64/float16/int32/int64/bool, C and F order,
transposed, strided and reversed storage, empty inputs and n = 1. Every result is compared
with two oracles: NumPy's own axis function on the whole array (X.sum(axis=1) ...) and plain
NumPy evaluating the lambda on each element (np.array([f(x) for x in X])), dtype included.

numpy explores widely; the compiled backends (cpu, opencl, webgpu, and CUDA C / MSL through
the CPU harness) draw from a fixed pool of (element shape, dtype, lambda) cases so each
backend compiles a few programs only, while layouts, lengths and values vary freely.
"""
from __future__ import annotations

import numpy as np
import pytest
from expr_backends import HARNESS, run
from hypothesis import example, given, settings
from hypothesis import strategies as st

import querycompute as qc
from querycompute.errors import UnsupportedTypeError


def lse(r):
    return r.max() + np.log(np.exp(r - r.max()).sum())


def lse_axis(X):
    m = X.max(axis=1, keepdims=True)
    return m[:, 0] + np.log(np.exp(X - m).sum(axis=1))


# (lambda, NumPy's axis-function form on the whole (n, k) array, dtypes it applies to)
ANY, NUM, FLOAT = "all", "num", "float"
VEC = [
    (lambda r: r.sum(), lambda X: X.sum(axis=1), ANY),
    (lambda r: r.max(), lambda X: X.max(axis=1), ANY),
    (lambda r: r.min(), lambda X: X.min(axis=1), ANY),
    (lambda r: r.argmin(), lambda X: X.argmin(axis=1), ANY),
    (lambda r: r.argmax(), lambda X: X.argmax(axis=1), ANY),
    (lambda r: r.mean(), lambda X: X.mean(axis=1), ANY),
    (lambda r: r.any(), lambda X: X.any(axis=1), ANY),
    (lambda r: r.all(), lambda X: X.all(axis=1), ANY),
    (lambda r: r * 2 + 1, lambda X: X * 2 + 1, ANY),
    (lambda r: r @ r, lambda X: np.einsum("ij,ij->i", X, X), NUM),
    (lambda r: (r > r.mean()).sum(), lambda X: (X > X.mean(axis=1, keepdims=True)).sum(axis=1), NUM),
    (lambda r: np.linalg.norm(r), lambda X: np.linalg.norm(X, axis=1), FLOAT),
    (lse, lse_axis, FLOAT),
]
MAT = [
    (lambda m: m.sum(axis=0), lambda X: X.sum(axis=1), ANY),
    (lambda m: m.max(axis=1), lambda X: X.max(axis=2), ANY),
    (lambda m: m.argmin(axis=0), lambda X: X.argmin(axis=1), ANY),
    (lambda m: m.mean(axis=-1), lambda X: X.mean(axis=2), ANY),
    (lambda m: m.T, lambda X: X.transpose(0, 2, 1), ANY),
    (lambda m: np.sum(m, axis=(0, 1)), lambda X: X.sum(axis=(1, 2)), ANY),
    (lambda m: m.max(), lambda X: X.max(axis=(1, 2)), ANY),
    (lambda m: m[0, -1] + m[-1, 0], lambda X: X[:, 0, -1] + X[:, -1, 0], ANY),
    (lambda m: m @ m[0], lambda X: np.einsum("nij,nj->ni", X, X[:, 0]), NUM),
]
DTYPES = ["float32", "float64", "float16", "int32", "int64", "bool"]
LAYOUTS = ["C", "F", "transposed", "strided", "reversed"]


def applies(kinds: str, dtype: str) -> bool:
    kind = np.dtype(dtype).kind
    return kinds == ANY or (kinds == NUM and kind != "b") or (kinds == FLOAT and kind == "f")


def values(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind == "f":
        return rng.uniform(-2, 2, shape).astype(dtype)
    return rng.integers(-5, 6, shape).astype(dtype)


def laid_out(X: np.ndarray, layout: str) -> np.ndarray:
    """The same values as X in another memory layout (a view where the layout needs one)."""
    ax = tuple(range(X.ndim))
    if layout == "F":
        return np.asfortranarray(X)
    if layout == "transposed":      # element axes stored in reverse, then viewed back
        perm = (0,) + ax[:0:-1]
        return np.ascontiguousarray(X.transpose(perm)).transpose(perm)
    if layout == "strided":          # every other element and every other component
        big = np.zeros(tuple(2 * s for s in X.shape), X.dtype)
        big[(slice(None, None, 2),) * X.ndim] = X
        return big[(slice(None, None, 2),) * X.ndim]
    if layout == "reversed":         # negative strides on every axis
        rev = (slice(None, None, -1),) * X.ndim
        return np.ascontiguousarray(X[rev])[rev]
    return np.ascontiguousarray(X)


def tol(dtype) -> float:
    return {"float16": 3e-2, "float32": 3e-5}.get(str(np.dtype(dtype)), 1e-12)


def assert_matches(got, want, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, got.dtype, want.shape, want.dtype)
    if want.dtype.kind == "f":
        t = tol(want.dtype)
        scale = max(1.0, float(np.nanmax(np.abs(want), initial=0.0)))
        np.testing.assert_allclose(got, want, rtol=t, atol=t * scale, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def oracles(fn, axis_fn, X):
    """(NumPy's axis function on X, NumPy per element) -- the second one only for n > 0."""
    with np.errstate(all="ignore"):
        whole = np.asarray(axis_fn(X))
        each = np.array([fn(x) for x in X]) if len(X) else None
    return whole, each


REFUSED = object()


def run_on(q, backend: str, terminal: str = "to_array"):
    """The terminal on `backend`; REFUSED where webgpu refuses what WGSL / the adapter can't
    hold (a 64-bit value; more storage buffers than a shader stage binds), with that named."""
    try:
        return run(q, backend, terminal) if backend != "webgpu" else getattr(q.on(backend), terminal)()
    except UnsupportedTypeError as exc:
        assert backend == "webgpu" and "64" in str(exc), exc
    except qc.QueryError as exc:
        if not (backend == "webgpu" and "storage buffers" in str(exc)):
            raise
    return REFUSED


def check_select(fn, axis_fn, X, backend):
    whole, each = oracles(fn, axis_fn, X)
    with np.errstate(all="ignore"):
        got = run_on(qc.query(X).select(fn), backend)
    if got is REFUSED:
        return
    if got is None:                                    # float64 through the Metal harness
        assert backend == "metal"
        return
    if each is not None:
        assert_matches(got, each, f"{backend} per element")
    # the axis function agrees in value (in dtype too, but for float16 sums: float32 there)
    assert_matches(got, whole.astype(got.dtype) if each is not None else whole, f"{backend} axis")


def check_terminal(kind, X, backend):
    q = qc.query(X)
    if len(X) == 0 and kind != "sum":
        with pytest.raises(qc.EmptySequenceError):
            run(q, backend, kind) if backend != "webgpu" else getattr(q.on(backend), kind)()
        return
    got = run_on(q, backend, kind)
    if got is REFUSED or got is None:
        return
    acc = {"dtype": np.float32} if X.dtype == np.float16 and kind in ("sum", "mean") else {}
    want = np.asarray(getattr(X, kind)(axis=0, **acc)).astype(np.asarray(got).dtype)
    assert np.asarray(got).dtype == getattr(X[:1], kind)(axis=0).dtype, (kind, got.dtype)
    assert_matches(got, want, f"{backend} {kind}")


# ---- numpy: every shape 1..64 per axis, every dtype, layout and lambda -----------------------
@st.composite
def element_shapes(draw):
    if draw(st.booleans()):
        return (draw(st.integers(1, 64)),)
    a = draw(st.integers(1, 64))
    return (a, draw(st.integers(1, max(1, 64 // a))))


@settings(max_examples=40, deadline=None)
@given(s=element_shapes(), dtype=st.sampled_from(DTYPES), layout=st.sampled_from(LAYOUTS),
       n=st.integers(0, 9), which=st.integers(0, 100), seed=st.integers(0, 2 ** 16))
@example(s=(64,), dtype="int32", layout="C", n=1, which=3, seed=0)        # argmin of 64
@example(s=(8, 8), dtype="float16", layout="transposed", n=0, which=0, seed=0)
def test_item5_numpy_shapes_dtypes_layouts(s, dtype, layout, n, which, seed):
    fns = [f for f in (VEC if len(s) == 1 else MAT) if applies(f[2], dtype)]
    fn, axis_fn, _ = fns[which % len(fns)]
    X = laid_out(values((n,) + s, dtype, seed), layout)
    check_select(fn, axis_fn, X, "numpy")
    check_terminal(("sum", "min", "max", "mean")[which % 4], X, "numpy")


def test_item5_matrices_above_the_limit_are_refused_with_it_named():
    with pytest.raises(qc.QueryError, match="64"):
        qc.query(np.zeros((2, 64, 64), np.float32)).select(lambda m: m.sum()).to_array()


# ---- compiled backends: a fixed pool of compiled cases, free layouts / lengths / values ------
COMPILED = ["cpu"] + [b for b in ("opencl", "webgpu") if qc.backends()[b]["available"]] + HARNESS
POOL = [((3,), "float32", VEC[3]),          # argmin of vec3
        ((64,), "int32", VEC[0]),           # the longest scalarized vector
        ((3, 3), "float16", MAT[0]),        # float16 matrices: float32 accumulation
        ((5, 2), "float64", MAT[8]),        # m @ m[0]
        ((7,), "bool", VEC[8]),             # bool elements, r * 2 + 1 (int64)
        ((16,), "float32", VEC[12])]        # logsumexp (what WGSL runs: no 64-bit value)


@pytest.mark.parametrize("backend", COMPILED)
@settings(max_examples=10, deadline=None)
@given(case=st.integers(0, len(POOL) - 1), layout=st.sampled_from(LAYOUTS),
       n=st.integers(0, 300), seed=st.integers(0, 2 ** 16))
@example(case=0, layout="C", n=0, seed=0)
@example(case=1, layout="strided", n=1, seed=1)
def test_item5_compiled_backends_match_numpy(backend, case, layout, n, seed):
    if backend == "cpu":            # numba compiles are the slowest here: half the pool
        case %= 3
    s, dtype, (fn, axis_fn, _) = POOL[case]
    X = laid_out(values((n,) + s, dtype, seed), layout)
    check_select(fn, axis_fn, X, backend)
    check_terminal("sum" if case % 2 else "max", X, backend)


# ---- long rows: 1e4 and 1e5 values per element (rows.py / gpu_rows.py), a few examples -------
LONG = ["numpy", "cpu"] + [b for b in ("opencl",) if qc.backends()[b]["available"]]
ROW_FNS = [VEC[0], VEC[1], VEC[12]]                     # r.sum(), r.max(), logsumexp


@pytest.mark.parametrize("backend", LONG)
@settings(max_examples=4, deadline=None)
@given(m=st.sampled_from([0, 1, 3]), k=st.sampled_from([10 ** 4, 10 ** 5]),
       dtype=st.sampled_from(["float32", "float64", "int32"]), layout=st.sampled_from(["C", "F", "strided"]),
       which=st.integers(0, 2), seed=st.integers(0, 2 ** 16))
@example(m=1, k=10 ** 5, dtype="float32", layout="strided", which=2, seed=0)
def test_item5_long_rows_match_numpy(backend, m, k, dtype, layout, which, seed):
    fn, axis_fn, kinds = ROW_FNS[which]
    if not applies(kinds, dtype):
        fn, axis_fn, _ = ROW_FNS[0]
    X = laid_out(values((m, k), dtype, seed), layout)
    whole, each = oracles(fn, axis_fn, X)
    got = qc.query(X).select(fn).on(backend).to_array()
    for want in (whole, each):
        if want is not None:
            # long float32 sums: both sides round differently (tree vs pairwise): relative to k
            t = tol(dtype) * (20 if dtype == "float32" else 1)
            assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
            np.testing.assert_allclose(got, want, rtol=t, atol=t * np.sqrt(k))
    kind = ("sum", "max")[which % 2]
    check_terminal(kind, X, backend)


# ---- staged operators on shaped elements: refused, naming the operator and the way out -------
def test_item3_staged_operators_name_themselves_and_the_way_out():
    X = values((20, 3), "float32", 5)
    cases = [("order_by", lambda q: q.order_by(lambda r: r.sum())),
             ("order_by", lambda q: q.select(lambda r: r.sum()).order_by(lambda v: v)),
             ("take", lambda q: q.take(3)), ("distinct", lambda q: q.distinct()),
             ("skip", lambda q: q.where(lambda r: r[0] > 0).skip(2))]
    for name, build in cases:
        with pytest.raises(qc.QueryError) as e:
            build(qc.query(X)).on("numpy").to_array()
        msg = str(e.value)
        assert msg.startswith(f"{name}(...)") and "(3,)" in msg and "argsort" in msg, msg
    with pytest.raises(qc.QueryError, match=r"^last\(\.\.\.\)"):
        qc.query(X).on("numpy").last()
    # what the message advises works, and where + first act on whole elements
    keys = qc.query(X).select(lambda r: r.sum()).on("numpy").to_array()
    np.testing.assert_array_equal(X[np.argsort(keys, kind="stable")], X[np.argsort(X.sum(axis=1), kind="stable")])
    for backend in ("numpy", "cpu"):
        got = qc.query(X).where(lambda r: r.max() > 1.5).on(backend).first()
        np.testing.assert_array_equal(got, X[X.max(axis=1) > 1.5][0])


def test_item4_many_accumulators_fit_shared_memory():
    """sum() of 64-value elements is 64 accumulators: the block tree runs over groups of
    them, each kernel's threadgroup arrays within 16 KiB (WebGPU's default, half of Metal's
    32 KiB; one array per accumulator would take 128 KiB). The results: the Metal harness
    cases of test_item5_compiled_backends_match_numpy."""
    import re
    size = {"long": 8, "ulong": 8, "int": 4, "uint": 4, "float": 4, "half": 2, "bool": 1}
    X = np.zeros((10, 64), np.int32)
    for terminal in ("sum", "max"):
        src = qc.query(X).source("metal", terminal=terminal)
        for kernel in src.split("kernel void ")[1:]:
            arrays = re.findall(r"threadgroup (\w+) \w+\[(\d+)\];", kernel)
            assert arrays and sum(size[t] * int(n) for t, n in arrays) <= 16 * 1024, kernel[:80]
