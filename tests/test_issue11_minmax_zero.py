"""Issue 11 item 8 (min/max part): np.minimum / np.maximum and the builtins min / max (which act
as them) give NumPy's exact zero sign and NaN on every backend: on equal operands (0.0 and
-0.0) NumPy's float32/float64 loops return the second operand, its float16 loop the first."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from expr_backends import assert_same_bits, oracle, select_everywhere

VALUES = [0.0, -0.0, np.nan, 1.0, -1.0, np.inf, -np.inf]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_item8_minimum_maximum_signed_zero_and_nan(dtype):
    pairs = list(itertools.product(VALUES, repeat=2))
    a = np.array([p[0] for p in pairs], dtype)
    b = np.array([p[1] for p in pairs], dtype)
    lam = ("lambda a, b: (np.minimum(a, b), np.maximum(a, b), min(a, b), max(a, b), "
           "min(a, b, a), max(b, a, b), np.minimum(b, a))")
    want = oracle((a, b), lam)
    for backend, got in select_everywhere((a, b), lam).items():
        if got is not None:
            assert_same_bits(got, want, f"{backend} {dtype}")


def test_item8_zero_constants_of_either_sign_are_different_programs():
    """0.0 == -0.0 in Python: by value, `np.maximum(v, 0.0)` and `np.maximum(v, -0.0)` were
    one program and could share a compiled kernel; the IR compares constants by repr."""
    from querycompute._codegen.ir import expr as E
    assert E.Const(0.0, "float32") != E.Const(-0.0, "float32")
    assert E.Const(float("nan"), "float64") == E.Const(float("nan"), "float64")
    assert len({E.Const(0.0, "float64"), E.Const(-0.0, "float64"), E.Const(0.0, "float64")}) == 2
    a = E.Binary("max", E.Load(0, "float32"), E.Const(0.0, "float32"), "float32")
    b = E.Binary("max", E.Load(0, "float32"), E.Const(-0.0, "float32"), "float32")
    assert a != b and hash(a) != hash(b)
