"""Issue 11 item 6: float -> integer casts of NaN, inf, out-of-range and negative values give
NumPy's x86-64 result (its scalar conversion, np.uint32(v) on a NumPy float) on every backend:
int64/int32 truncate with MIN for NaN/inf/out-of-range, uint32 wraps from the int64 result,
int8/int16/uint8/uint16 from the int32 one, uint64 converts [2^63, 2^64) exactly and gives 0
from 2^64 up (docs/guide.md, "Casts")."""
from __future__ import annotations

import numpy as np
import pytest

from chains import INT_DTYPES
from expr_backends import assert_same_bits, oracle, select_everywhere

SPECIAL = [np.nan, np.inf, -np.inf, -2.5, -1.0, -0.5, -0.0, 0.0, 0.5, 255.9, 256.0, -129.0,
           300.7, -300.7, 65504.0, -65504.0, 70000.5, -70000.5, 2.0**31 - 0.5, -2.0**31 - 0.5,
           2.0**31, 3e9, -3e9, 5e9, 1e10, -1e10, 2.0**63 - 1024, 2.0**63, -2.0**63,
           -2.0**63 - 2048, 1e19, 1.5e19, 2.0**64 - 2048, 2.0**64, 1e20, -1e20, 1e30]
CASTS = [f"np.{d}(v)" for d in INT_DTYPES] + ["bool(v)", "np.bool_(v)"]


@pytest.mark.parametrize("src", ["float16", "float32", "float64"])
def test_item6_float_to_int_casts_match_numpy_on_x86(src):
    x = np.array(SPECIAL, np.float64).astype(src)
    lam = f"lambda v: ({', '.join(CASTS)})"
    want = oracle(x, lam)
    for backend, got in select_everywhere(x, lam).items():
        if got is not None:                # Metal has no float64
            assert_same_bits(got, want, f"{backend} {src}")


def test_item6_issue_example_uint32():
    x = np.array([-2.5, np.nan, np.inf, 1e10, -1e10])
    want = oracle(x, "lambda v: np.uint32(v)")
    for backend, got in select_everywhere(x, "lambda v: np.uint32(v)").items():
        if got is not None:
            assert_same_bits(got, want, backend)


def test_item6_cast_feeding_a_comparison():
    """An out-of-range conversion is poison to LLVM: a comparison of it must not fold."""
    x = np.array([np.nan, 1e10, -1e10, 3.5, -3.5, 2.0**63, 1e30])
    lam = "lambda v: (np.int64(v) < 0, np.uint8(v) == 0, np.int32(v) + 1 > np.int32(v))"
    want = oracle(x, lam)
    for backend, got in select_everywhere(x, lam).items():
        if got is not None:
            assert_same_bits(got, want, backend)
