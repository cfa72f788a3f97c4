"""Issue 11 item 1: integer arithmetic wraps (two's complement) on every backend, at every
width, also where a comparison follows (LLVM folds `v + 1 > v` to True when numba marks the
add `nsw`, and C's signed overflow is undefined behaviour). Each test puts many expressions
in one tuple-valued select, so a dtype costs one compile per backend."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from chains import INT_DTYPES, load_lambdas
from expr_backends import ALL, assert_same_bits, oracle, run, select_everywhere


def edges(dtype: str) -> np.ndarray:
    ii = np.iinfo(dtype)
    vals = [ii.min, ii.min + 1, ii.min // 2, -1, 0, 1, 2, 3, ii.max // 2, ii.max // 2 + 1,
            ii.max - 1, ii.max]
    return np.array([v for v in vals if ii.min <= v <= ii.max], dtype=dtype)


# Expressions over v that overflow at the edges of every integer type, as values and as the
# comparisons the issue found folded away.
WRAPPING = ["v + 1", "v - 1", "v * 2", "v * v", "-v", "abs(v)", "v << 1", "v * 4 >> 2",
            "v * 2 // 2", "v + v + v", "~v + 1"]
SIGNED_ONLY = ["v // -1", "v % -1"]       # -1 is out of range for unsigned (NumPy 2 raises)
CHECKS = ["v + 1 > v", "-v == v", "v * 2 // 2 == v", "(v * 4) >> 2 == v", "abs(v) >= 0",
          "v - 1 < v", "v * v >= 0", "v + 1 - 1 == v", "v * 3 > v"]


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_item1_wrapping_values_and_comparisons_every_width(dtype):
    x = edges(dtype)
    texts = WRAPPING + (SIGNED_ONLY if np.iinfo(dtype).min < 0 else []) + CHECKS
    lam = f"lambda v: ({', '.join(texts)})"
    want = oracle(x, lam)
    for backend, got in select_everywhere(x, lam).items():
        assert_same_bits(got, want, f"{backend} {dtype} {lam}")


def test_item1_issue_examples_int64():
    """The issue's int64 examples, counted (a filter feeding a reduction)."""
    x = np.array([2**63 - 1, -2**63, 5])
    cases = ["v + 1 > v", "-v == v", "v*2//2 == v", "(v*4) >> 2 == v", "int(v) + 1 > int(v)"]
    for text, f in zip(cases, load_lambdas([f"lambda v: {t}" for t in cases])):
        # int() gives an int64 in the lambda language (DESIGN.md section 4), not a bignum
        want = int(oracle(x, f"lambda v: {text.replace('int(v)', 'np.int64(v)')}").sum())
        for backend in ALL:
            assert run(qc.query(x).where(f), backend, "count") == want, (backend, text)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_item1_int_min_floordiv_and_mod_minus_one(dtype):
    """INT_MIN // -1 == INT_MIN and INT_MIN % -1 == 0 (NumPy's results), never a trap,
    also with the divisor read from a column."""
    lo = np.iinfo(dtype).min
    a = np.array([lo, lo, 7, -7, lo, lo + 1], dtype)
    b = np.array([-1, 1, -1, 2, 0, -1], dtype)
    lam = "lambda a, b: (a // b, a % b, -a, a * b, a - b)"
    want = oracle((a, b), lam)
    for backend, got in select_everywhere((a, b), lam).items():
        assert_same_bits(got, want, f"{backend} {dtype}")
