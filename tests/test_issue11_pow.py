"""Issue 11 item 7: `**`.

Float: a constant exponent of 2, -1, 0.5, 1 or 0 is x * x, 1 / x, sqrt(x) (with pow's special
values), x and 1 on every backend, bit for bit; any other exponent is the platform's pow,
a math function: C99's special values exactly (as Python on NumPy scalars gives them),
finite results within a few ulp. Integer `**` with a negative exponent read at run time (a
column or a captured value) gives 0 on every backend (NumPy raises; a kernel cannot), and a
negative constant exponent is refused when the lambda is translated (docs/guide.md).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import querycompute as qc
from chains import load_lambdas
from expr_backends import ALL, assert_same_bits, oracle, run, same_bits, select_everywhere

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0,
           0.1, 964.7983, 1e30, -1e30, 1e-30, 7.0, 1e-200]


def _values(dtype):
    rng = np.random.default_rng(7)
    extra = np.concatenate([rng.random(40) * 10, rng.standard_normal(40) * 100])
    with np.errstate(all="ignore"):
        return np.concatenate([np.array(SPECIAL), extra]).astype(dtype)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_item7_constant_exponents_bit_identical_everywhere(dtype):
    x = _values(dtype)
    lam = ("lambda v: (v ** 2, v ** -1, v ** 0.5, v ** 1, v ** 0, np.power(v, 2), "
           "pow(v, 0.5), v ** 2.0)")
    with np.errstate(all="ignore"):
        root = np.where(x == -np.inf, np.inf, np.abs(np.sqrt(x))).astype(dtype)
        rule = (x * x, np.divide(1, x, dtype=dtype), root, x, np.ones_like(x), x * x, root, x * x)
    py = oracle(x, lam)
    finite = np.isfinite(x) & (x != 0)
    for i, (r, p) in enumerate(zip(rule, py)):
        # the rule is Python's result on every special value, and within an ulp elsewhere
        assert same_bits(r[~finite], p[~finite]).all(), (i, x[~finite], r[~finite], p[~finite])
        both = finite & np.isfinite(p) & np.isfinite(r)
        assert same_bits(r[finite & ~both], p[finite & ~both]).all(), i       # overflow: inf
        ulp = np.abs(np.spacing(p[both].astype(dtype))).astype(np.float64)
        assert (np.abs(r[both].astype(np.float64) - p[both].astype(np.float64)) <= ulp).all(), i
    for backend, got in select_everywhere(x, lam).items():
        if got is not None:
            assert_same_bits(got, rule, f"{backend} {dtype}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_item7_runtime_exponents_special_values_exact(dtype):
    """pow's special values (C99 Annex F) as Python on NumPy scalars gives them, with the
    exponent read from a column; finite results within a few ulp (each libm rounds its own
    way: glibc, pocl, CUDA's pow)."""
    ys = [0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 1.5,
          -1.5, 0.3, 1e10]
    pairs = list(itertools.product(SPECIAL, ys))
    with np.errstate(all="ignore"):
        a = np.array([p[0] for p in pairs]).astype(dtype)
        b = np.array([p[1] for p in pairs]).astype(dtype)
    want = oracle((a, b), "lambda a, b: a ** b")
    special = ~(np.isfinite(a) & np.isfinite(b) & (a != 0) & np.isfinite(want) & (want != 0)) \
        | (np.abs(a) == 1) | (b == 0)
    for backend, got in select_everywhere((a, b), "lambda a, b: a ** b").items():
        if got is None:
            continue
        bad = special & ~same_bits(got, want)
        assert not bad.any(), (backend, a[bad], b[bad], got[bad], want[bad])
        close = same_bits(got, want) | (np.abs(got - want) <= 4 * np.abs(np.spacing(want)))
        assert close.all(), (backend, a[~close], b[~close], got[~close], want[~close])


def test_item7_numpy_backend_matches_python_scalars_for_captured_half():
    """A captured 0.5 reaches np.power as a scalar, which NumPy fast-paths into sqrt
    ((-0.0) ** 0.5 == -0.0 there); the reference gives Python's 0.0 and inf."""
    x = np.array([-0.0, -np.inf, 0.0, np.inf, np.nan, 1.0])
    half = 0.5
    want = np.array([v ** half for v in x])
    for backend in ALL:
        got = run(qc.query(x).select(lambda v: v ** half), backend)
        if got is not None:                  # Metal has no float64
            assert_same_bits(got, want, backend)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint16"])
def test_item7_integer_negative_exponent_at_run_time_gives_zero(dtype):
    """NumPy raises ValueError for integers to negative powers; a kernel cannot raise per
    element, so a negative exponent met at run time gives 0 on every backend (documented)."""
    signed = np.iinfo(dtype).min < 0
    a = np.array([2, 3, 1, 0, 5, 2], dtype)
    b = np.array([3, -1, -2, 2, 0, -5] if signed else [3, 1, 2, 2, 0, 5], dtype)
    with np.errstate(all="ignore"):
        want = np.array([p ** q if q >= 0 else 0 for p, q in zip(a, b)], dtype)
    for backend, got in select_everywhere((a, b), "lambda a, b: a ** b").items():
        assert_same_bits(got, want, f"{backend} {dtype}")


def test_item7_integer_negative_exponent_captured_and_constant():
    x = np.array([1, 2, 3], np.int64)
    k = -2
    for backend in ALL:
        np.testing.assert_array_equal(run(qc.query(x).select(lambda v: v ** k), backend), [0, 0, 0])
    (f,) = load_lambdas(["lambda v: v ** -1"])
    with pytest.raises(qc.UnsupportedLambdaError, match="negative integer powers"):
        qc.query(x).select(f).on("numpy").to_array()
