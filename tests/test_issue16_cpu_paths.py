"""Issue 16 item 6: the cpu backend's faster paths for shaped elements, against NumPy.

- scalarized X.sum(axis=0) / min / max / mean / agg (k <= 64): one row pass over the (n, k)
  array the columns are views of (backends/cpu_columns.py -> rows_columns.py);
- long-row column reductions (rows_columns.py: tiles run by morsels, in any grouping with the
  same bits) and the row kernels (small inputs one call on this thread, large ones morsels).
Inputs include NaN / inf, n = 0 and 1, k = 1 and 64, float16 / float32 / float64 / ints,
F-ordered, strided and reversed arrays (float16 scalarized elements run the generic pass). Shapes are few and reused so that few kernels compile."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute.backends.cpu import rows_columns

N = 40_000          # above cpu_columns.MIN_VALUES for every k here


def _data(n, k, dtype, seed=0):
    X = np.random.default_rng(seed).uniform(-50, 50, (n, k))
    return X.astype(dtype)


def _want(X, kind):
    d = X.dtype
    if kind == "sum":
        return X.sum(axis=0, dtype=np.float32 if d == np.float16 else None).astype(
            np.float16 if d == np.float16 else X.sum(axis=0).dtype)
    if kind == "mean":
        return X.mean(axis=0, dtype=np.float32 if d.kind == "f" and d.itemsize <= 4 else None).astype(
            X.mean(axis=0).dtype)
    return getattr(X, kind)(axis=0)


def _check(got, want, dtype, X=None):
    """got == want up to the dtype's rounding; sums (X given) within eps * sum |x| per column
    of the float64 sum (cancelling sums of +-50: NumPy's own float32 sum is that far off)."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    tol = {"float16": 1e-2, "float32": 1e-5}.get(np.dtype(dtype).name, 1e-12)
    atol = tol
    if X is not None and X.dtype.kind == "f":
        atol = tol * np.abs(X.astype(np.float64)).sum(axis=0).reshape(got.shape) / max(1, len(X)) ** 0.5
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    ok = np.isnan(w) | (g == w) | (np.abs(g - w) <= atol + tol * np.abs(w))
    assert ok.all(), (got, want)


def _kernel_names():
    return [k.name for k in qc.last_trace().kernels]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "uint8"])   # float16: below
def test_item6_scalarized_axis0_terminals_match_numpy(dtype):
    X = _data(N, 10, dtype)
    q = qc.query(X).on("cpu")
    for kind in ("sum", "min", "max", "mean") if dtype == "float32" else ():
        _check(getattr(q, kind)(), _want(X, kind), dtype, X if kind == "sum" else None)
    got = q.agg(s=qc.sum, lo=qc.min, hi=qc.max, n=qc.count)
    _check(got["s"], _want(X, "sum"), dtype, X)
    _check(got["lo"], X.min(axis=0), dtype)
    _check(got["hi"], X.max(axis=0), dtype)
    assert got["n"] == N
    assert qc.last_trace().backend == "cpu"
    assert _kernel_names()[0].startswith("qc_columns"), _kernel_names()


@pytest.mark.parametrize("layout", ["C", "F", "strided", "reversed", "matrix"])
def test_item6_scalarized_axis0_layouts(layout):
    base = _data(2 * N, 20, "float32", seed=3)
    X = {"C": base[:N, :10], "F": np.asfortranarray(base[:N, :10]), "strided": base[::2, ::2],
         "reversed": base[::-1, :10], "matrix": base[:N, :9].reshape(N, 3, 3)}[layout]
    q = qc.query(X).on("cpu")
    _check(q.sum(), X.sum(axis=0), "float32", X)
    # F-ordered and reversed arrays run the generic pass (columns contiguous / negative stride)
    assert _kernel_names()[0].startswith("qc_columns") == (layout not in ("F", "reversed"))
    if layout not in ("F", "reversed"):
        _check(q.max(), X.max(axis=0), "float32")


def test_item6_scalarized_axis0_special_values_and_sizes():
    X = _data(N, 10, "float32", seed=5)
    X[7, 2] = np.nan
    X[100, 4] = np.inf
    X[200, 5], X[300, 5] = np.inf, -np.inf
    q = qc.query(X).on("cpu")
    for kind in ("sum", "min", "max"):
        np.testing.assert_array_equal(np.isnan(getattr(q, kind)()), np.isnan(getattr(X, kind)(axis=0)))
        _check(getattr(q, kind)(), getattr(X, kind)(axis=0), "float32", X if kind == "sum" else None)
    for n, k in ((0, 10), (1, 10), (N, 1), (1000, 64)):
        Y = _data(n, k, "float32", seed=n + k)
        _check(qc.query(Y).on("cpu").sum(), Y.sum(axis=0), "float32", Y)
        if n:
            _check(qc.query(Y).on("cpu").min(), Y.min(axis=0), "float32")


def test_item6_column_tiles_in_any_ranges_give_the_same_bits():
    """The column kernels' one entry point over a range of tiles: the tiles run as one call,
    one by one, or in reverse order by ranges (as morsels on any threads would), then the
    chunks combine in chunk order: the same bits each time."""
    X = _data(3000, 70, "float32", seed=7)
    X[5, 3] = np.nan
    rows, width = 64, 32                         # several chunks and column blocks
    chunks, ntiles = -(-3000 // rows), -(-3000 // rows) * -(-70 // width)
    ns = rows_columns._kernels().ns

    def sums(ranges):
        part = np.empty((chunks, 70), np.float32)
        for t0, t1 in ranges:
            ns["col_sum_tiles"](t0, t1, X, part, rows, width)
        return ns["col_sum_combine"](part)

    def minmax(ranges):
        parts = [np.empty((chunks, 70), np.float32) for _ in range(2)] + [np.empty((chunks, 70), np.bool_)]
        for t0, t1 in ranges:
            ns["col_minmax_tiles"](t0, t1, X, *parts, rows, width, 2)
        return ns["col_minmax_combine"](*parts)
    one = [(0, ntiles)]
    split = [(t, min(ntiles, t + 5)) for t in range(0, ntiles, 5)][::-1]
    singles = [(t, t + 1) for t in range(ntiles)]
    got = sums(one)
    for ranges in (split, singles):
        np.testing.assert_array_equal(sums(ranges).view(np.int32), got.view(np.int32))
        for a, b in zip(minmax(one), minmax(ranges)):
            np.testing.assert_array_equal(a, b)
    _check(got, X.sum(axis=0, dtype=np.float64).astype(np.float32), "float32", X)


@pytest.mark.parametrize("dtype", ["float32", "int8", "float16"])
def test_item6_long_row_columns_match_numpy(dtype):
    X = _data(300, 1000, dtype, seed=11)
    if dtype != "int8":
        X[3, 4] = np.nan
    q = qc.query(X).on("cpu")
    for kind in ("sum", "min", "max", "mean"):
        got, want = getattr(q, kind)(), _want(X, kind)
        np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), np.isnan(want.astype(np.float64)))
        _check(got, want, dtype, X if kind == "sum" else None)
    Xs = X[::-2, ::3]                                # non-contiguous rows and columns
    _check(qc.query(Xs).on("cpu").sum(), _want(Xs, "sum"), dtype, Xs)


def test_item6_long_row_select_small_and_large_inputs():
    """A small input runs the row kernel as one call on this thread, a large one by morsels
    (rows_numba.row_units): both equal NumPy."""
    def lse(r):
        return r.max() + np.log(np.exp(r - r.max()).sum())
    for shape in ((5, 100), (4, (1 << 20) // 4 + 1)):
        X = _data(*shape, "float32", seed=13)
        X[1, 7] = np.inf if shape[0] == 5 else X[1, 7]
        got = qc.query(X).on("cpu").select(lse).to_array()
        Xd = X.astype(np.float64)
        m = Xd.max(axis=1, keepdims=True)
        with np.errstate(invalid="ignore"):
            want = m[:, 0] + np.log(np.exp(Xd - m).sum(axis=1))
        np.testing.assert_allclose(got, want, rtol=2e-5)


def test_item6_row_exp_is_correctly_rounded():
    """Long-row kernels compute float32 exp with the branch-free _exp32 helper: each value is
    the correctly rounded exp (so within NumPy's own float32 error), with NaN / inf / 0."""
    v = np.concatenate([np.linspace(-110, 95, 3000), [np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72,
                                                      88.73, -103.9, 1e-30]]).astype(np.float32)
    X = np.full((len(v), 70), -np.inf, np.float32)      # exp(-inf) = 0: the row max is exp(v)
    X[:, 5] = v
    got = qc.query(X).on("cpu").select(lambda r: np.exp(r).max()).to_array()
    with np.errstate(over="ignore"):
        exact = np.exp(v.astype(np.float64)).astype(np.float32)
        mine = np.exp(v)
    np.testing.assert_array_equal(got, exact)
    fin = np.isfinite(exact) & (exact > 0)
    ulp = np.abs(got[fin].view(np.int32).astype(np.int64) - mine[fin].view(np.int32))
    assert ulp.max() <= 2


@pytest.mark.parametrize("dtype", ["float64", "int16"])
def test_item6_row_min_max_steps(dtype):
    X = _data(50, 300, dtype, seed=17)
    if dtype == "float64":
        X[3, 10] = np.nan
        X[4, :] = -0.0
        X[5, 7] = -np.inf
    got = qc.query(X).on("cpu").select(lambda r: r.max() - r.min()).to_array()
    with np.errstate(invalid="ignore"):
        want = X.max(axis=1) - X.min(axis=1)
    np.testing.assert_array_equal(got, want)
