"""Helper functions the numba dialect's generated modules call, as Python source text.

They are pasted into each generated module (only the ones it uses), so a printed module is
self-contained and readable on its own. Every helper is compiled with fastmath off: these
are the places where NumPy's exact semantics live (Python-sign division, shifts, float16
rounding), and they must not inherit a kernel's reassociation flag.
"""
from __future__ import annotations


def jit_decorator(cache: bool, fastmath: str = "False", nogil: bool = False) -> str:
    """The `@njit(...)` line of a generated function. Scalar helpers and the element
    function use the default: `fastmath=False` is explicit because numba otherwise
    *inherits* the caller's flags into a callee. `cache` switches numba's on-disk cache;
    `nogil` releases the GIL while the function runs (a fused pass's entry points, which the
    morsel scheduler's threads call: backends/cpu/morsels.py)."""
    gil = "nogil=True, " if nogil else ""
    return f'@njit(error_model="numpy", fastmath={fastmath}, {gil}cache={cache})'


_TEMPLATES = {
    # float16 values live in float32 registers; after every operation they are rounded to
    # the nearest float16 value, which is exactly what NumPy's half loops do. Rounding is
    # done in float64 (exact for float32 and float64 inputs, so one rounding, no double
    # rounding): scale by the float16 ulp of x's binade, rint (ties to even), scale back.
    "f16": '''
{jit}
def _f16(x):
    """Nearest float16 value of float x (ties to even, overflow -> inf), as float32."""
    d = np.float64(x)
    a = abs(d)
    if not (a < 65520.0):              # nan, inf, or rounds past float16's max (65504)
        return np.float32(d if d != d else math.copysign(math.inf, d))
    if a < 6.103515625e-05:            # below 2**-14: float16 subnormals, ulp 2**-24
        ulp = 5.960464477539063e-08
    else:
        ulp = math.ldexp(1.0, math.frexp(a)[1] - 11)
    return np.float32(math.copysign(np.rint(a / ulp) * ulp, d))
''',
    # Decode IEEE half bits (float16 inputs are passed as their uint16 view).
    "f16_decode": '''
{jit}
def _f16_decode(u):
    """float16 bit pattern (uint16) -> its value as float32."""
    e = (np.int64(u) >> 10) & 0x1F
    m = np.int64(u) & 0x3FF
    if e == 0:
        v = np.float32(m) * np.float32(5.960464477539063e-08)
    elif e == 31:
        v = np.float32(np.inf) if m == 0 else np.float32(np.nan)
    else:
        v = np.float32(math.ldexp(np.float64(m + 1024), np.int64(e) - 25))
    return -v if (np.int64(u) & 0x8000) else v
''',
    # Encode a float32 that already holds a float16 value into half bits (outputs).
    "f16_encode": '''
{jit}
def _f16_encode(x):
    """float32 holding a float16 value -> its uint16 bit pattern."""
    d = np.float64(x)
    sign = 0x8000 if math.copysign(1.0, d) < 0 else 0
    a = abs(d)
    if a != a:
        return np.uint16(0x7E00 | sign)
    if a == math.inf:
        return np.uint16(0x7C00 | sign)
    if a < 6.103515625e-05:            # zero or subnormal: mantissa counts 2**-24 units
        return np.uint16(sign | np.int64(a * 16777216.0))
    m, e = math.frexp(a)               # a = m * 2**e, m in [0.5, 1)
    return np.uint16(sign | ((e + 14) << 10) | (np.int64(m * 2048.0) - 1024))
''',
    # Integer // and % with Python signs; b == 0 gives 0 (NumPy's result), and b == -1 is
    # answered without dividing because INT_MIN // -1 traps on x86.
    "sfloordiv": '''
{jit}
def _sfloordiv(a, b):
    if b == 0:
        return a - a
    if b == -1:
        return -a
    return a // b
''',
    "smod": '''
{jit}
def _smod(a, b):
    if b == 0 or b == -1:
        return a - a
    return a % b
''',
    "ufloordiv": '''
{jit}
def _ufloordiv(a, b):
    if b == 0:
        return a - a
    return a // b
''',
    "umod": '''
{jit}
def _umod(a, b):
    if b == 0:
        return a - a
    return a % b
''',
    # Float -> integer as NumPy does it on x86-64 (see codegen/expr.py Cast): numba's casts
    # are LLVM's fptosi/fptoui, whose out-of-range results are poison (they saturate, or
    # anything), so the in-range test comes first. int32/int64: NaN and out-of-range give
    # MIN; narrower types (and uint32) are narrowed from these by the caller, which wraps.
    "f2i64": '''
{jit}
def _f2i64(x):
    """float -> int64: truncation; NaN, inf and out-of-range give INT64_MIN (x86's cvttsd2si)."""
    if -9223372036854775808.0 <= x < 9223372036854775808.0:
        return np.int64(x)
    return np.int64(-9223372036854775808)
''',
    "f2i32": '''
{jit}
def _f2i32(x):
    """float -> int32: truncation; NaN, inf and out-of-range give INT32_MIN (x86's cvttsd2si)."""
    if -2147483649.0 < x < 2147483648.0:
        return np.int32(x)
    return np.int32(-2147483648)
''',
    "f2u64": '''
{jit}
def _f2u64(x):
    """float -> uint64 as x86-64: [2**63, 2**64) exact, beyond (and inf) 0, else via int64."""
    if x >= 9223372036854775808.0:
        return np.uint64(x) if x < 18446744073709551616.0 else np.uint64(0)
    return np.uint64(_f2i64(x))
''',
    # Integer power by repeated squaring in uint64 (wraps modulo 2**64; the caller narrows
    # to the node's type, which is the same residue); negative exponents give 0.
    "ipow": '''
{jit}
def _ipow(a, b):
    if b < 0:
        return np.uint64(0)
    r = np.uint64(1)
    base = np.uint64(a)
    e = np.uint64(b)
    while e != np.uint64(0):
        if e & np.uint64(1):
            r = r * base
        base = base * base
        e = e >> np.uint64(1)
    return r
''',
    # exp of a float32 without a libm call, so a loop over it vectorises (numba has no SVML
    # here; libm's expf is a scalar call). Computed in float64 and rounded once: x = k ln2 + r
    # (Cody-Waite, |r| <= ln2 / 2, k rounded by the 1.5 * 2**52 trick), exp(r) by its Taylor
    # series to r**11 (error < 1e-13, so the float32 result is the correctly rounded one:
    # 0 ulp on 2e6 points of [-110, 95], where np.exp's float32 loop is within 2 ulp), times
    # 2**k built from its bits. x is clamped to +-200 first (exp is 0 / inf in float32 past
    # -104 / 89, and 2**k stays a normal float64); NaN passes through. Branch-free. Used where
    # the loop vectorises (long-row steps, querycompute/backends/cpu/rows_numba.py); element kernels keep
    # libm's expf, faster when the loop over elements stays scalar (measured 34 vs 116 ms).
    "exp32": '''
{jit}
def _exp32(x):
    d = np.float64(x)
    c = d if d > -200.0 else -200.0
    c = c if c < 200.0 else 200.0
    k = (c * 1.4426950408889634 + 6755399441055744.0) - 6755399441055744.0
    r = (c - k * 0.6931471803691238) - k * 1.9082149292705877e-10
    p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120 + r * (
        1.0 / 720 + r * (1.0 / 5040 + r * (1.0 / 40320 + r * (1.0 / 362880 + r * (
            1.0 / 3628800 + r * (1.0 / 39916800)))))))))))
    y = np.float32(p * bits_float((np.int64(k) + 1023) << 52))
    return y if d == d else np.float32(d)
''',
}

# Float floor division and remainder transcribe NumPy's npy_divmod / npy_floor_divide /
# npy_remainder (numpy/_core/src/npymath/npy_math_internal.h.src) operation by operation,
# in the operands' own float type {T}, so inf/nan/zero cases come out bit-identical. Their
# fmod is the "fmod" helper `_fmod_{T}`: see _FMOD for why float32 has its own.
_FLOAT_TEMPLATES = {
    "ffloordiv": '''
{jit}
def _ffloordiv_{T}(a, b):
    if b == 0:
        return np.{T}(a / b)
    mod = _fmod_{T}(a, b)
    div = np.{T}((a - mod) / b)
    if mod != 0:
        if (b < 0) != (mod < 0):
            div = np.{T}(div - np.{T}(1.0))
    if div != 0:
        fl = np.{T}(np.floor(div))
        if np.{T}(div - fl) > np.{T}(0.5):
            fl = np.{T}(fl + np.{T}(1.0))
        return fl
    return np.{T}(math.copysign(0.0, np.{T}(a / b)))
''',
    "fremainder": '''
{jit}
def _fremainder_{T}(a, b):
    mod = _fmod_{T}(a, b)
    if b == 0:
        return mod
    if mod != 0:
        if (b < 0) != (mod < 0):
            mod = np.{T}(mod + b)
        return mod
    return np.{T}(math.copysign(0.0, b))
''',
}


# fmod is a libm call (LLVM's frem) costing tens of cycles and no vector form. For float32
# operands it is computed exactly in float64 instead whenever |a/b| < 2**28, falling back to
# the libm call otherwise (inf, nan, b == 0, huge quotients). Why that is exact: a and b are
# integer multiples of u = the smaller of their ulps, and b < 2**24 of b's ulps, so a
# non-integer a/b is at least 2**-24 from every integer once |a/b| >= 1 (and for |a/b| < 1
# it is far from 1 unless a and b share a binade, where the same bound holds); the double
# quotient's error is below |a/b| * 2**-53 < 2**-25, so trunc() of it is the true integer
# quotient q. q (< 2**28) times b (24 bits) fits 53 bits, and a - q*b is a multiple of u
# smaller than |b|, so both are exact: the result is fmod's, whose sign is a's (copysign
# also gives -0.0 for a == -0.0 or an exact zero remainder of a negative a).
# The fallback is an opaque libm call (numba_py_runtime.libm_fmod): LLVM would evaluate an
# `frem` on every element of a vectorised loop. tests/test_cpu_fmod.py checks all of this
# bit for bit against np.fmod / np.remainder.
_FMOD = {
    "float32": '''
{jit}
def _fmod_float32(a, b):
    """np.fmod(a, b) of float32 operands, exactly, mostly without the libm call."""
    x = np.float64(a)
    y = np.float64(b)
    q = x / y
    if abs(q) < 268435456.0 and abs(y) < np.inf:
        return np.float32(math.copysign(x - np.trunc(q) * y, x))
    return libm_fmod(a, b)
''',
    "float64": '''
{jit}
def _fmod_float64(a, b):
    """np.fmod(a, b) of float64 operands (the libm call: no wider type to compute in)."""
    return np.float64(np.fmod(a, b))
''',
}


def helper_name(kind: str, float_type: str | None = None) -> str:
    """The function name a generated module calls for helper `kind`."""
    return f"_{kind}_{float_type}" if float_type else f"_{kind}"


def helper_source(kind: str, float_type: str | None = None, cache: bool = False) -> str:
    """Source text of one helper (float helpers are instantiated per float type)."""
    jit = jit_decorator(cache)
    if kind == "fmod":
        return _FMOD[float_type].replace("{jit}", jit).strip()
    if float_type:
        return _FLOAT_TEMPLATES[kind].replace("{T}", float_type).replace("{jit}", jit).strip()
    return _TEMPLATES[kind].replace("{jit}", jit).strip()
