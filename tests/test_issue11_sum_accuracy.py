"""Issue 11 item 3 (float sums and means as accurate as NumPy's pairwise sum) and item 8's sum
part (signed zero: a sum starts from +0.0, as np.sum does, so a sum of -0.0s, an empty sum
and a sum of a filter that keeps nothing are +0.0).

NumPy's pairwise sum has a rounding error of at most eps * log2(n) * sum(|x|) (`bound`; the
tests check np.sum meets it). In practice it is far smaller, so a backend's error must be
within 4x NumPy's own error on the same data, or 4 ulp of the exact sum (`as_accurate`):
tight enough that lane accumulators summing thousands of elements each (what the cpu
backend did before) fail at n = 65,536 and n = 1e8.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import querycompute as qc
from harness import runner
from harness.plans import run_pass
from querycompute._codegen.errors import UnsupportedType
from querycompute.run.engine import assemble

BACKENDS = ["numpy"] + [b for b in ("cpu", "opencl", "cuda") if qc.backends()[b]["available"]]
needs_harness = pytest.mark.skipif(not runner.available()[0], reason=runner.available()[1])


def bound(x: np.ndarray) -> float:
    eps = float(np.finfo(x.dtype).eps)
    return eps * max(1, math.ceil(math.log2(max(len(x), 2)))) * float(np.sum(np.abs(x), dtype=np.float64))


def as_accurate(got, numpy_value, exact: float) -> bool:
    ulp = float(np.spacing(np.asarray(exact, dtype=np.asarray(numpy_value).dtype)))
    return abs(float(got) - exact) <= 4 * max(abs(float(numpy_value) - exact), ulp)


def in_harness(q, terminal: str, dialect: str):
    lowered, req, cols, _ = q.lowered(terminal)
    return assemble(lowered, run_pass(lowered.pass_, dialect, cols, ()), req)


def tenths(n: int) -> tuple[np.ndarray, float]:
    """n float32 copies of 0.1 and their exact sum (n * 0.1f is exact in float64 for n < 2**29)."""
    x = np.full(n, np.float32(0.1))
    return x, n * float(np.float32(0.1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_item3_float32_sum_of_tenths_within_numpys_bound(backend):
    x, exact = tenths(65_536)
    assert abs(float(np.sum(x)) - exact) <= bound(x)
    got = qc.query(x).on(backend).sum()
    assert type(got) is np.float32
    assert as_accurate(got, np.sum(x), exact), (got, np.sum(x))
    mean = qc.query(x).on(backend).mean()
    assert as_accurate(mean, np.mean(x), exact / len(x)), (mean, np.mean(x))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_item3_random_sums_within_numpys_bound(backend, dtype):
    """Several cpu chunks and GPU blocks; a filter in the pass, as W1 has."""
    rng = np.random.default_rng(11)
    x = (rng.random(1_000_003) * 2000).astype(dtype)
    kept = x[x > 500]
    exact = math.fsum(kept.astype(np.float64))
    assert abs(float(np.sum(kept)) - exact) <= bound(kept)
    got = qc.query(x).where(lambda v: v > 500).on(backend).sum()
    assert type(got) is np.dtype(dtype).type
    assert as_accurate(got, np.sum(kept), exact), (got, np.sum(kept), exact)


@pytest.mark.parametrize("backend", BACKENDS)
def test_item3_float16_mean_accumulates_accurately(backend):
    """np.mean of float16 sums in float32 (pairwise) and rounds once: 70,000 x 60000 -> 60000."""
    x = np.full(70_000, np.float16(60000))
    got = qc.query(x).on(backend).mean()
    assert type(got) is np.float16 and got == np.mean(x) == np.float16(60000), got
    # np.sum of float16 is the float32 pairwise sum rounded once (no rounding per add)
    y = np.full(5000, np.float16(0.1))
    assert qc.query(y).on(backend).sum() == np.sum(y) == np.float16(np.sum(y.astype(np.float32)))


@needs_harness
@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_item3_harness_sum_of_tenths_within_numpys_bound(dialect):
    x, exact = tenths(65_536)
    got = in_harness(qc.query(x), "sum", dialect)
    assert as_accurate(got, np.sum(x), exact), got


def test_item3_sum_of_1e8_tenths_within_numpys_bound():
    """n = 1e8 (generated here, 400 MB): one sum per compiled backend."""
    x, exact = tenths(10**8)
    want = np.sum(x)
    assert abs(float(want) - exact) <= bound(x)
    for backend in [b for b in BACKENDS if b != "numpy"]:
        got = qc.query(x).on(backend).sum()
        assert as_accurate(got, want, exact), (backend, got, want)


# ---- item 8: signed zero -------------------------------------------------------------------
def zero_cases(dtype: str):
    """(label, query) pairs whose np.sum is +0.0: -0.0s, nothing, a filter that keeps nothing."""
    neg = np.full(70_000, -0.0, dtype=dtype)
    return [("one -0.0", qc.query(neg[:1])), ("seven -0.0", qc.query(neg[:7])),
            ("70000 -0.0", qc.query(neg)), ("empty", qc.query(neg[:0])),
            ("filtered out", qc.query(np.ones(1000, dtype)).where(lambda v: v > 5)),
            ("filter keeps -0.0", qc.query(np.concatenate([neg[:300], np.ones(300, dtype)])).where(lambda v: v < 0.5))]


def _same_bits(got, want) -> bool:
    return type(got) is type(want) and got == want and np.signbit(got) == np.signbit(want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_item8_sum_and_mean_of_negative_zeros_is_positive_zero(backend, dtype):
    for label, q in zero_cases(dtype):
        values = q.on("numpy").to_array()
        want = np.sum(values)
        assert not np.signbit(want)
        got = q.on(backend).sum()
        assert _same_bits(got, want), (label, got, want)
        mean = q.on(backend).mean(default=None)
        if len(values):
            assert _same_bits(mean, np.mean(values)), (label, mean)
        else:
            assert mean is None, label


@needs_harness
@pytest.mark.parametrize("dialect", ["cuda", "metal"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_item8_harness_sum_of_negative_zeros_is_positive_zero(dialect, dtype):
    for label, q in zero_cases(dtype):
        want = np.sum(q.on("numpy").to_array())
        try:
            got = in_harness(q, "sum", dialect)
        except UnsupportedType:
            assert dialect == "metal" and dtype == "float64"
            return
        assert _same_bits(got, want), (label, got, want)


# ---- the numpy backend reduces in windows: a long range is never materialised -------------
def test_item3_numpy_backend_reduces_a_range_in_bounded_memory():
    import tracemalloc

    from querycompute._codegen.ops.reduce import reference as numpy_reduce
    n = 8 * numpy_reduce.WINDOW + 3                 # 8 bytes an index: 67 MB if materialised

    def make(length):
        return qc.range(length).where(lambda i: i % 3 != 0).on("numpy")
    small = make(10)
    small.sum(), small.count()      # imports and planning happen here, outside the measurement
    q = make(n)
    tracemalloc.start()
    try:
        total, count = q.sum(), q.count()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    every = n * (n - 1) // 2
    assert total == every - 3 * ((n - 1) // 3) * ((n - 1) // 3 + 1) // 2
    assert count == n - (n - 1) // 3 - 1
    assert peak < n * 8 / 2, peak


@pytest.mark.parametrize("dtype", ["int64", "float32"])
def test_item3_numpy_windows_combine_like_one_pass(monkeypatch, dtype):
    """Windows of 1,000 elements give what one window gives: every aggregate's partial states
    combine in window order (sum, count, min/max with NaN, any/all, first, mean, fold)."""
    from querycompute._codegen.ops.reduce import reference as numpy_reduce
    rng = np.random.default_rng(5)
    x = (rng.integers(-50, 50, 10_007)).astype(dtype)
    if dtype == "float32":
        x[7_500] = np.nan
    q = qc.query(x).where(lambda v: v > 30).on("numpy")
    aggs = dict(total=qc.sum, lo=qc.min, hi=qc.max, n=qc.count, avg=qc.mean)
    whole = (q.agg(**aggs), q.first(), q.any(lambda v: v > 48), q.all(lambda v: v < 60),
             q.aggregate(lambda a, v: v if v != 0 else a, 3) if dtype == "int64" else None)
    monkeypatch.setattr(numpy_reduce, "WINDOW", 1000)
    windowed = (q.agg(**aggs), q.first(), q.any(lambda v: v > 48), q.all(lambda v: v < 60),
                q.aggregate(lambda a, v: v if v != 0 else a, 3) if dtype == "int64" else None)
    kept = x[x > 30]
    for key in aggs:
        a, b = whole[0][key], windowed[0][key]
        assert type(a) is type(b) and (a == b or (np.isnan(a) and np.isnan(b))
                                       or abs(float(a) - float(b)) <= bound(kept)), key
    assert whole[1:] == windowed[1:]
