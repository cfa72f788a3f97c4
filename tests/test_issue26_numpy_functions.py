"""Issue 26 item 6: the NumPy functions users write in lambdas, on every backend here (numpy,
cpu, opencl, webgpu where the values are 32-bit, and the CUDA C / Metal kernels through the
CPU harness), against NumPy itself called on NumPy scalars (tests/test_outside_vectors.py's
special values and its check_everywhere): np.where, np.clip / v.clip, v.astype, np.fmod,
np.signbit, np.reciprocal, np.exp2, np.cbrt, np.fix, np.float_power, np.fmax / np.fmin,
np.nan_to_num, np.deg2rad / rad2deg / radians / degrees, the comparison and logical ufuncs,
np.conj / np.real / np.imag and .real / .imag. Bit for bit, except exp2, cbrt and
float_power with a general exponent (math functions: within the ulp the guide documents).

One value NumPy does not pin down: np.fmax / np.fmin of 0.0 and -0.0 (its scalar float32
loop returns b, its scalar float64 loop a, its vector loops either); the kernels give
np.maximum's / np.minimum's zero there, which is what the oracle spells for equal operands.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import querycompute as qc
from chains import load_lambdas
from test_outside_vectors import (FLOATS, INTS, check_everywhere, expand, float_pairs, float_values,
                                  int_pairs, per_float_dtype)
from querycompute.errors import UnsupportedLambdaError

EXACT = ["np.fix(v)", "np.signbit(v)", "np.reciprocal(v)", "np.fmod(v, 2.5)", "np.fmod(v, -0.0)",
         "np.clip(v, -1.5, 100.0)", "np.clip(v, None, 0.0)", "v.clip(min=-0.0)", "v.clip(-1.0, 1.0)",
         "np.clip(v, a_min=0.5, a_max=2.5)", "np.nan_to_num(v)",
         "np.nan_to_num(v, nan=-1.0, posinf=2.0, neginf=-2.0)", "np.nan_to_num(v, copy=True, neginf=0.0)",
         "np.deg2rad(v)", "np.rad2deg(v)", "np.radians(v)", "np.degrees(v)",
         "np.where(v > 1, v, -v)", "np.where(v, v, 0.5)", "v.astype(np.int32)", "v.astype('uint8')",
         "v.astype(bool)", "v.astype(np.float16)", "np.conj(v)", "np.conjugate(v)", "np.real(v)",
         "np.imag(v)", "v.real", "v.imag", "v.conj()", "v.conjugate()", "np.logical_not(v)",
         "np.greater(v, 1)", "np.less_equal(v, 0.5)", "np.equal(v, -0.0)", "np.not_equal(v, v)",
         "np.logical_and(v, 1.0)", "np.logical_or(v, 0.0)", "np.logical_xor(v, 1)", "np.fmax(v, 1.0)",
         "np.fmin(v, -1.0)",
         # 64-bit results (numpy / cpu / opencl / CUDA C; refused on webgpu, Metal has no double)
         "v.astype(int)", "v.astype(float)", "v.astype('int64')", "np.float_power(v, 2)",
         "np.where(v, 1, 2.5)"]
MATH = ["np.exp2(v)", "np.cbrt(v)", "np.float_power(v, 1.5)"]


def test_float_functions_on_special_values():
    """Signed zeros, infinities, NaN, subnormals, the largest finite value, ties: fix keeps
    -0.0 (fix(-0.5) is -0.0), signbit reads -0.0, reciprocal(+-0) is +-inf, fmod by 0 is
    NaN and keeps a's sign, clip propagates NaN, nan_to_num's defaults are the dtype's
    extremes, deg2rad / rad2deg multiply by NumPy's constant rounded in the dtype (float16 in
    float32), astype converts as np.<type>(v) does; exp2 / cbrt (WGSL and Metal helpers)
    within 4 ulp with exact special values and exact powers of two."""
    cols = {f"v{d[5:]}": float_values(d) for d in FLOATS}
    for name in list(cols):                       # exact cubes and powers of two, big and small
        extra = np.array([8.0, -27.0, 0.125, 2.0 ** -60, -(2.0 ** 63), 127.0, -149.0, 24.0], np.float64)
        with np.errstate(all="ignore"):
            cols[name] = np.concatenate([cols[name], extra.astype(cols[name].dtype)])
    exprs, _ = per_float_dtype(EXACT + MATH)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_everywhere(cols, exprs, inexact=set(per_float_dtype(MATH)[0]))


PAIRS = ["np.fmod(a, b)", "np.fmax(a, b)", "np.fmin(a, b)", "np.clip(a, b, 3.0)", "a.clip(-1.0, b)",
         "np.where(a < b, a, b)", "np.greater_equal(a, b)", "np.less(a, b)", "np.equal(a, b)",
         "np.logical_and(a, b)", "np.logical_or(a, b)", "np.logical_xor(a, b)"]
PAIR_MATH = ["np.float_power(a, b)"]
# NumPy's fmax / fmin loops disagree with each other on a 0.0 / -0.0 tie (module docstring)
PAIR_ORACLE = {"np.fmax(a, b)": "(np.maximum(a, b) if a == b else np.fmax(a, b))",
               "np.fmin(a, b)": "(np.minimum(a, b) if a == b else np.fmin(a, b))"}


def test_float_pairs_of_special_values():
    """Every pair of special values: fmod's signs and NaNs (exact, also by subnormals),
    fmax / fmin ignore one NaN, clip with NaN and infinite bounds, where's promotion,
    comparisons and logic with NaN (NaN is true), float_power computed in float64."""
    cols, exprs, spelled, inexact = {}, [], [], set()
    for d in FLOATS:
        names = {"a": f"a{d[5:]}", "b": f"b{d[5:]}"}
        cols[names["a"]], cols[names["b"]] = float_pairs(d)
        exprs += expand(PAIRS + PAIR_MATH, names)
        spelled += expand([PAIR_ORACLE.get(e, e) for e in PAIRS + PAIR_MATH], names)
        inexact |= set(expand(PAIR_MATH, names))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_everywhere(cols, exprs, spelled, inexact=inexact)


INT_FUNCS = ["np.fmod(a, b)", "np.reciprocal(a)", "np.fmax(a, b)", "np.fmin(a, b)", "np.clip(a, b, 7)",
             "np.clip(a, -1, 300)", "a.clip(None, b)", "np.fix(a)", "np.where(a < b, a, 7)",
             "np.logical_and(a, b)", "np.logical_not(a)", "np.less(a, b)", "np.not_equal(a, b)",
             "np.conj(a)", "np.imag(a)", "a.real", "np.nan_to_num(a)", "a.astype(np.int8)"]
# signbit of a 32-bit integer is computed in float64 (NumPy's loop): not on webgpu
INT_64 = ["np.signbit(a)", "np.float_power(a, 2)", "a.astype(float)"]


def test_integer_extremes():
    """Every integer width at MIN, -1, 0, 1, MAX: fmod takes a's sign, x fmod 0 and MIN fmod
    -1 are 0; reciprocal is C's (T)(1.0 / x) (1 / 0 converts as the guide's x86-64 rule: MIN
    for int32 / int64, 0 for the others); clip by a Python int beyond the dtype's range
    clips nothing on that side (NumPy 2); fix, conj, real keep the integer."""
    cols, exprs = {}, []
    for d in INTS:
        names = {"a": f"a_{d}", "b": f"b_{d}"}
        cols[names["a"]], cols[names["b"]] = int_pairs(d)
        exprs += expand(INT_FUNCS + (INT_64 if np.dtype(d).itemsize != 4 else []), names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_everywhere(cols, exprs)


def test_bools_and_python_scalars():
    """NumPy's bool loops (fmod and reciprocal in int8, fix keeps a bool) and Python scalars:
    np.where of two Python ints is int64, np.float_power of Python numbers float64, .real of
    a captured-free Python float stays a float."""
    a = np.array([0, 0, 1, 1], bool)
    b = np.array([0, 1, 0, 1], bool)
    exprs = ["np.fmod(a, b)", "np.reciprocal(a)", "np.fix(a)", "np.logical_xor(a, b)", "np.conj(a)",
             "np.imag(a)", "np.where(a, 1, 2)", "np.where(b, a, 2.5)", "a + np.float_power(2, 3)",
             "float(a).real", "np.clip(a, False, b)", "np.signbit(a)", "np.greater(b, a)"]
    check_everywhere({"a": a, "b": b}, exprs)


def test_refusals_say_what_to_do():
    """What NumPy refuses or a kernel can't do is an UnsupportedLambdaError naming it."""
    cases = {"lambda v: np.where(v)": "np.where takes 3 arguments",
             "lambda v: float(v).astype(np.int32)": "np.int32(...)",
             "lambda v: np.clip(v, 300, 400)": "wider type",
             "lambda v: np.nan_to_num(v, big=1.0)": "keyword 'big' is not supported",
             "lambda v: v.round()": "scalar methods: astype",
             "lambda v: np.clip(v, 1, 2, 3, 4)": "at most 3 arguments",
             "lambda v: v.clip(0, max=1, min=2)": "'min' twice",
             "lambda v: v.astype(np.complex64)": "not a kernel element type",
             "lambda v: np.nan_to_num(v, copy=False)": "only with copy=True"}
    fns = load_lambdas(list(cases))
    x = np.arange(4, dtype=np.int8)
    for f, (text, words) in zip(fns, cases.items()):
        with pytest.raises(UnsupportedLambdaError) as info:
            qc.query(x).select(f).on("numpy").to_array()
        assert words in str(info.value), (text, str(info.value))


def test_functions_passed_as_they_are():
    """select(np.cbrt), zip(...).select(np.fmax), where(np.signbit): a supported function
    passed itself stands for the lambda calling it."""
    x = np.array([-8.0, -0.0, 0.0, 27.0, np.nan], np.float32)
    y = np.array([1.0, np.nan, -1.0, np.nan, 2.0], np.float32)
    for b in ("numpy", "cpu"):
        # a math function may differ by its libm's documented ulp (DESIGN.md section 4): NumPy's
        # own float32 cbrt(27) is 2.9999998 where it takes its SIMD path (AVX-512), 3.0 elsewhere
        got = qc.query(x).select(np.cbrt).on(b).to_array()
        np.testing.assert_array_max_ulp(got, np.cbrt(x), maxulp=1)
        assert np.array_equal(np.signbit(got), np.signbit(np.cbrt(x)))
        assert np.array_equal(qc.query(x, y).select(np.fmax).on(b).to_array(), np.fmax(x, y), equal_nan=True)
        assert np.array_equal(qc.query(x).where(np.signbit).on(b).to_array(), x[np.signbit(x)])


@pytest.mark.parametrize("dtype", FLOATS)
def test_cuda_source_of_the_new_functions_compiles_with_nvrtc(dtype):
    """exp2f / cbrtf / fmodf (exp2 / cbrt / fmod for double) in the CUDA C that NVRTC
    compiles for sm_80 without FMA contraction (the harness above ran the same source on
    the CPU)."""
    nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="NVRTC bindings missing")
    try:
        nvrtc.getVersion()
    except Exception as exc:
        pytest.skip(f"NVRTC library not loadable ({exc})")
    x = np.ones(4, dtype)
    src = qc.query(x, x).select("lambda a, b: (np.exp2(a), np.cbrt(a), np.fmod(a, b), "
                                "np.signbit(a), np.deg2rad(a))").source("cuda")
    f = "" if dtype == "float64" else "f"
    for fn in ("exp2", "cbrt", "fmod"):
        assert f"{fn}{f}(" in src, fn
    prog = nvrtc.createProgram(src, "q.cu", [], [])
    try:
        nvrtc.compileProgram(prog, ["--gpu-architecture=sm_80", "--fmad=false"])
    except nvrtc.NVRTCError as exc:
        pytest.fail(f"NVRTC failed: {exc}\n{nvrtc.getProgramLog(prog)}\n{src}")
    finally:
        nvrtc.destroyProgram(prog)
