"""A 16-bit negation on CUDA goes through an opaque cvt (dialects/cuda.py): on an H100 with
NVRTC 13.0, `-v == v` over int16 / uint16 came out False for -32768 / 32768 when `-v` was
also computed, because that release's ptxas folds sext16(neg.s16 x) into neg.s32(sext16 x).
The cvt keeps the truncation (NVRTC 13.0's SASS then sign-extends the negation before the
compare, checked by hand with nvdisasm); the harness runs the spelling here, the real-GPU
suites (tests/expr_backends.py) on a device."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from chains import load_lambdas
from expr_backends import HARNESS, run


@pytest.mark.parametrize("dtype", ["int16", "uint16"])
def test_16_bit_negation_is_truncated_by_a_cvt(dtype):
    (f,) = load_lambdas(["lambda v: (-v, -v == v, -(v + 1))"])
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min + 1, 0, 1, info.max, info.max // 2 + 1], dtype)
    q = qc.query(x).select(f)
    src = q.source("cuda")
    assert "qc_trunc16(" in src and 'asm("cvt.u16.u32 %0, %1;"' in src
    want = q.on("numpy").to_array()
    for backend in ["cuda"] if "cuda" in HARNESS or qc.backends()["cuda"]["available"] else []:
        got = run(q, backend)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), w)


def test_other_widths_negate_as_before():
    (f,) = load_lambdas(["lambda v: -v"])
    for dtype in ("int8", "int32", "int64"):
        assert "qc_trunc16" not in qc.query(np.zeros(3, dtype)).select(f).source("cuda")
