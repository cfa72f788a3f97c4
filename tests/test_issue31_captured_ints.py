"""Issue 31 item 1: captured Python ints inside an expression follow NumPy 2 (a weak
sub-expression such as `t * 4 // 8` is exact, arithmetic that does not fit raises, comparisons
are exact) instead of wrapping; item 11: a comparison with an out-of-range captured int is
evaluated (as NumPy does), not refused with a message claiming NumPy raises."""
import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import querycompute as qc
from querycompute.errors import CapturedValueOverflowError

os.environ.setdefault("WGPU_BACKEND_TYPE", "Vulkan")
_AVAILABLE = qc.backends()
BACKENDS = ["numpy", "cpu"] + (["opencl"] if _AVAILABLE["opencl"]["available"] else [])
BACKENDS32 = BACKENDS + (["webgpu"] if _AVAILABLE.get("webgpu", {}).get("available") else [])


@pytest.mark.parametrize("backend", BACKENDS32)
def test_equal_to_captured_plus_constant_is_exact(backend):
    t = 2 ** 40
    v = np.array([5], np.uint32)
    assert qc.query(v).on(backend).where(lambda v: v == t + 5).count() == 0
    assert qc.query(v).on(backend).where(lambda v: v != t + 5).count() == 1
    assert qc.query(v).on(backend).where(lambda v: v < t + 5).count() == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_weak_subexpression_folds_exactly(backend):
    t = 2 ** 62
    v = np.array([0, 1], np.int64)
    got = qc.query(v).on(backend).select(lambda v: v + t * 4 // 8).to_array()
    assert got.dtype == np.int64
    assert got.tolist() == [2 ** 61, 2 ** 61 + 1]
    t = 2 ** 40          # a new value: same kernel (a parameter), new exact answer
    assert qc.query(v).on(backend).select(lambda v: v + t * 4 // 8).to_array().tolist() == [2 ** 39, 2 ** 39 + 1]


@pytest.mark.parametrize("backend", BACKENDS32)
def test_compare_below_int32_min_is_exact(backend):
    t = 2 ** 31
    v = np.array([0, 5], np.int32)
    assert qc.query(v).on(backend).where(lambda v: v > -t - 1).count() == 2
    assert qc.query(v).on(backend).where(lambda v: v <= -t - 1).count() == 0
    t = 3                # in range again: an ordinary comparison, same kernel
    assert qc.query(v).on(backend).where(lambda v: v > -t - 1).count() == 2
    assert qc.query(v).on(backend).where(lambda v: v <= -t + 4).count() == 1


@pytest.mark.parametrize("backend", BACKENDS32)
def test_arithmetic_out_of_range_raises_like_numpy(backend):
    t = 2 ** 40
    v = np.array([0, 5], np.int32)
    with pytest.raises(OverflowError):
        v + (t + 0)                                    # NumPy 2
    with pytest.raises(CapturedValueOverflowError, match=r"\(t \+ 0\) = 1099511627776.*int32.*NumPy 2 raises OverflowError"):
        qc.query(v).on(backend).select(lambda v: v + (t + 0)).to_array()
    t = 7
    assert qc.query(v).on(backend).select(lambda v: v + (t + 0)).to_array().tolist() == [7, 12]


@pytest.mark.parametrize("backend", BACKENDS32)
def test_item11_out_of_range_comparison_is_evaluated_not_refused(backend):
    t = 2 ** 40
    v = np.array([0, 5, -7], np.int32)
    assert (v > t).tolist() == [False] * 3            # NumPy 2 evaluates it exactly
    assert qc.query(v).on(backend).where(lambda v: v > t).count() == 0
    assert qc.query(v).on(backend).where(lambda v: v < t).count() == 3
    assert qc.query(v).on(backend).where(lambda v: v >= -t).count() == 3
    # arithmetic with the same value still raises, and the message is then true
    with pytest.raises(CapturedValueOverflowError, match="NumPy 2 raises OverflowError"):
        qc.query(v).on(backend).select(lambda v: v + t).to_array()


# --- differential fuzz against NumPy 2 on arrays with the same Python ints ---------------

INT_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]


def _near(x):
    return [x - 1, x, x + 1]


_SPECIAL = sorted({c for d in INT_DTYPES
                   for b in (np.iinfo(d).min, np.iinfo(d).max) for c in _near(int(b))}
                  | {c for b in (2 ** 31, -2 ** 31, 2 ** 32, 2 ** 63, -2 ** 63, 2 ** 64 - 1, 0)
                     for c in _near(b)})
CAPTURED = [c for c in _SPECIAL if -2 ** 63 <= c < 2 ** 64]      # what a capture may hold


def lambdas(t, k):
    """`v op t`, `v op (t + k)` and `(t * k) op v` for every op (k != 0)."""
    return [
        lambda v: v + t, lambda v: v + (t + k), lambda v: (t * k) + v,
        lambda v: v - t, lambda v: v - (t - k), lambda v: (t * k) - v,
        lambda v: v * t, lambda v: v * (t + k), lambda v: (t * k) * v,
        lambda v: v // t, lambda v: v // (t + k), lambda v: (t * k) // v,
        lambda v: v % t, lambda v: v % (t + k), lambda v: (t * k) % v,
        lambda v: v == t, lambda v: v == (t + k), lambda v: (t * k) == v,
        lambda v: v != t, lambda v: v != (t + k), lambda v: (t * k) != v,
        lambda v: v < t, lambda v: v < (t + k), lambda v: (t * k) < v,
        lambda v: v <= t, lambda v: v <= (-t - k), lambda v: (t * k) <= v,
        lambda v: v > t, lambda v: v > (t + k), lambda v: (t // k) > v,
        lambda v: v >= t, lambda v: v >= (t + k), lambda v: (t * k) >= v,
    ]


N_LAMBDAS = len(lambdas(0, 1))


def _check(backend, dtype, t, k, i):
    info = np.iinfo(dtype)
    v = np.array([info.min, info.max, 0, 1, info.max // 2, min(info.max, 7)], dtype)
    fn = lambdas(t, k)[i]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            expected = fn(v)
        except OverflowError:
            expected = None
    if expected is None:
        with pytest.raises(CapturedValueOverflowError):
            qc.query(v).on(backend).select(fn).to_array()
        return
    got = qc.query(v).on(backend).select(fn).to_array()
    assert got.dtype == expected.dtype and got.tolist() == expected.tolist(), \
        (dtype, t, k, i, got, expected)


@pytest.mark.parametrize("backend,examples", [("numpy", 300), ("cpu", 60)])
def test_fuzz_captured_ints_at_type_boundaries(backend, examples):
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(INT_DTYPES), st.sampled_from(CAPTURED),
           st.sampled_from([1, 2, 3, -1, -2]), st.integers(0, N_LAMBDAS - 1))
    def run(dtype, t, k, i):
        _check(backend, dtype, t, k, i)
    run()


def test_through_dask_chunks():
    da = pytest.importorskip("dask.array")
    t = 2 ** 40
    d = da.from_array(np.array([5, 6, 7, 8], np.uint32), chunks=2)
    assert qc.query(d).where(lambda v: v == t + 5).count() == 0
    t = 2 ** 62
    d64 = da.from_array(np.array([0, 1, 2, 3], np.int64), chunks=2)
    got = np.asarray(qc.query(d64).select(lambda v: v + t * 4 // 8).to_array())
    assert got.tolist() == [2 ** 61 + i for i in range(4)]
    t = 2 ** 40
    with pytest.raises(CapturedValueOverflowError, match="NumPy 2 raises OverflowError"):
        np.asarray(qc.query(da.from_array(np.array([0, 5], np.int32), chunks=1))
                   .select(lambda v: v + (t + 0)).to_array())
