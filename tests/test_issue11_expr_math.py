"""Issue 11 items 5 and 7: math functions of two float widths in one lambda, and `**`."""
from __future__ import annotations

import numpy as np
import pytest

from expr_backends import oracle, select_everywhere

# math.* and np.* names of the same function, valid on (0, 1)
PAIRS = [("sqrt", "sqrt"), ("exp", "exp"), ("log", "log"), ("log2", "log2"), ("log10", "log10"),
         ("sin", "sin"), ("cos", "cos"), ("tan", "tan"), ("asin", "arcsin"), ("acos", "arccos"),
         ("atan", "arctan"), ("sinh", "sinh"), ("cosh", "cosh"), ("tanh", "tanh"),
         ("asinh", "arcsinh"), ("atanh", "arctanh"), ("expm1", "expm1"), ("log1p", "log1p")]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_item5_math_and_numpy_functions_of_two_widths_in_one_lambda(dtype):
    """math.f(v) (a float64) and np.f(v) (the element's float type) in one lambda compile
    on every backend (numba's np.log2 could not be used for both types in one function)."""
    x = np.array([0.125, 0.25, 0.5, 0.75, 0.9], dtype)
    lam = "lambda v: (" + ", ".join(f"math.{m}(v) + np.{n}(v)" for m, n in PAIRS) + ")"
    want = oracle(x, lam)
    for backend, got in select_everywhere(x, lam).items():
        if got is None:
            continue            # Metal: math.* computes in float64, which Metal lacks
        for (m, _), g, w in zip(PAIRS, got, want):
            assert g.dtype == w.dtype, (backend, m)
            # the result is rounded to dtype: a few of its ulps (libms differ, DESIGN.md 4)
            tol = 4 * np.finfo(dtype).eps * np.abs(w.astype(np.float64))
            assert (np.abs(g.astype(np.float64) - w.astype(np.float64)) <= tol).all(), (backend, m, g, w)
