"""Semantic helper functions of the WGSL prelude: where WGSL and NumPy disagree.

`define(printer, name)` returns the WGSL source of helper `name`. WGSL defines more than C
(i32 overflow wraps, `a / 0` is `a`, `abs(MIN)` is MIN, float -> int conversions clamp),
but not what NumPy does: Python-signed // and %, x // 0 == 0, shifts by >= the bit width,
NaN-propagating min/max, x86's float -> int results, and NaN / inf tests (read from the bits,
so no driver can fold them away). Narrow integers (int8, uint16, ...) live in 32-bit
registers: `qc_wrap_<dtype>` brings a result back into its type's range.
"""
from __future__ import annotations

from .. import dtypes as D


def define(p, name: str) -> str:
    body = _SIMPLE.get(name)
    if body is not None:
        for dep in _DEPS.get(name, ()):
            p.need(dep)
        return body
    kind, _, d = name[3:].partition("_")
    maker = {"wrap": _wrap, "min": _minmax, "max": _minmax, "floordiv": _floordiv, "mod": _mod,
             "pow": _pow, "lshift": _shift, "rshift": _shift, "cast": _cast}.get(kind)
    if maker is None:
        raise ValueError(f"no WGSL helper {name!r}")
    return maker(p, name, kind, d)


def _fn(sig: str, body: str, why: str) -> str:
    inner = "\n".join("    " + ln for ln in body.strip("\n").splitlines())
    return "\n".join(f"// {w}" for w in why.splitlines()) + f"\nfn {sig} {{\n{inner}\n}}"


_SIMPLE = {
    "qc_f32_bits": _fn("qc_f32_bits(b: u32) -> f32", "return bitcast<f32>(b);",
                       "a float from its bits (NaN and inf constants: WGSL refuses them as constant expressions)"),
    "qc_unpack8": _fn("qc_unpack8(w: u32, i: i32) -> u32", "return (w >> ((u32(i) & 3u) * 8u)) & 0xFFu;",
                      "byte i % 4 of a packed word (bool, int8, uint8 buffers)"),
    "qc_unpack16": _fn("qc_unpack16(w: u32, i: i32) -> u32", "return (w >> ((u32(i) & 1u) * 16u)) & 0xFFFFu;",
                       "half i % 2 of a packed word (int16, uint16, float16 buffers)"),
    "qc_isnan": _fn("qc_isnan(x: f32) -> bool", "return (bitcast<u32>(x) & 0x7FFFFFFFu) > 0x7F800000u;",
                    "NaN test on the bits"),
    "qc_isinf": _fn("qc_isinf(x: f32) -> bool", "return (bitcast<u32>(x) & 0x7FFFFFFFu) == 0x7F800000u;",
                    "infinity test on the bits"),
    "qc_isfinite": _fn("qc_isfinite(x: f32) -> bool", "return (bitcast<u32>(x) & 0x7F800000u) != 0x7F800000u;",
                       "finite test on the bits"),
    "qc_copysign": _fn("qc_copysign(a: f32, b: f32) -> f32",
                       "return bitcast<f32>((bitcast<u32>(a) & 0x7FFFFFFFu) | (bitcast<u32>(b) & 0x80000000u));",
                       "copysign on the bits (NaN signs too)"),
    "qc_round_f16": _fn("qc_round_f16(x: f32) -> f32", """
let b = bitcast<u32>(x);
if ((b & 0x7F800000u) == 0x7F800000u) { return x; }
let e = max(i32((b >> 23u) & 0xFFu) - 127, -14);
let q = ldexp(1.0f, e - 10);
let r = round(x / q) * q;
if (abs(r) > 65504.0f) { return bitcast<f32>((b & 0x80000000u) | 0x7F800000u); }
return r;""", "x rounded to float16 precision (ties to even; subnormal halves step 2^-24; past\n"
              "65504 it overflows to inf): a multiple of the half quantum, exact in f32"),
    "qc_h2f": _fn("qc_h2f(h: u32) -> f32", """
let sign = (h & 0x8000u) << 16u;
let e = (h >> 10u) & 0x1Fu;
let m = h & 0x3FFu;
if (e == 0u) { return bitcast<f32>(sign | bitcast<u32>(ldexp(f32(m), -24))); }
if (e == 31u) { return bitcast<f32>(sign | 0x7F800000u | (m << 13u)); }
return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));""",
                  "IEEE half bits -> f32, exactly (subnormals and NaN payloads kept)"),
    "qc_f2h": _fn("qc_f2h(x: f32) -> u32", """
let b = bitcast<u32>(x);
let sign = (b >> 16u) & 0x8000u;
let e = i32((b >> 23u) & 0xFFu) - 127;
if (e == 128) { return sign | 0x7C00u | select(0u, 0x200u | ((b >> 13u) & 0x3FFu), (b & 0x7FFFFFu) != 0u); }
if (e < -14) { return sign | u32(abs(x) * 16777216.0f); }
return sign | (u32(e + 15) << 10u) | ((b >> 13u) & 0x3FFu);""",
                  "f32 holding a half-precision value (qc_round_f16) -> its IEEE half bits"),
    "qc_fmod": _fn("qc_fmod(x: f32, y: f32) -> f32", """
let ax = abs(x);
let ay = abs(y);
if (qc_isnan(x) || qc_isnan(y) || qc_isinf(x) || ay == 0.0f) { return qc_f32_bits(0x7FC00000u); }
if (qc_isinf(y) || ax < ay) { return x; }
let fx = frexp(ax);
let fy = frexp(ay);
var mx = u32(ldexp(fx.fract, 24));
let my = u32(ldexp(fy.fract, 24));
for (var e = fx.exp - fy.exp; e > 0; e--) {
    if (mx >= my) { mx -= my; }
    mx <<= 1u;
}
if (mx >= my) { mx -= my; }
return qc_copysign(ldexp(f32(mx), fy.exp - 24), x);""",
                   "C's fmod, exact: shift-and-subtract on the 24-bit mantissas (at most 277 steps).\n"
                   "WGSL's % on floats is a - b * trunc(a / b), which rounds"),
    "qc_expm1": _fn("qc_expm1(x: f32) -> f32", """
let u = exp(x);
if (u == 1.0f) { return x; }
let um1 = u - 1.0f;
if (um1 == -1.0f) { return -1.0f; }
return um1 * x / log(u);""", "exp(x) - 1 without cancellation near 0 (WGSL has no expm1)"),
    "qc_log1p": _fn("qc_log1p(x: f32) -> f32", """
let u = 1.0f + x;
if (u == 1.0f) { return x; }
return log(u) * x / (u - 1.0f);""", "log(1 + x) without cancellation near 0 (WGSL has no log1p)"),
    "qc_log10": _fn("qc_log10(x: f32) -> f32", "return log2(x) * 0.30102999566398120f;",
                    "log10 (WGSL has none)"),
    "qc_hypot": _fn("qc_hypot(a0: f32, b0: f32) -> f32", """
let a = abs(a0);
let b = abs(b0);
if (qc_isinf(a) || qc_isinf(b)) { return bitcast<f32>(0x7F800000u); }
let m = max(a, b);
if (m == 0.0f) { return 0.0f; }
let r = min(a, b) / m;
return m * sqrt(1.0f + r * r);""", "sqrt(a*a + b*b) without overflow; inf wins over NaN as in C"),
    "qc_pow": _fn("qc_pow(x: f32, y: f32) -> f32", """
if (y == 0.0f || x == 1.0f) { return 1.0f; }
if (qc_isnan(x) || qc_isnan(y)) { return x + y; }
let odd = trunc(y) == y && abs(y) < 16777216.0f && (i32(abs(y)) & 1) == 1;
let r = pow(abs(x), y);
if (x < 0.0f || (x == 0.0f && (bitcast<u32>(x) & 0x80000000u) != 0u)) {
    if (trunc(y) != y && x != 0.0f) { return qc_f32_bits(0x7FC00000u); }
    return select(r, -r, odd);
}
return r;""", "C's pow: WGSL's pow is exp2(y * log2(x)), undefined for x < 0"),
}
_DEPS = {"qc_hypot": ("qc_isinf",), "qc_pow": ("qc_isnan", "qc_f32_bits"),
         "qc_fmod": ("qc_isnan", "qc_isinf", "qc_f32_bits", "qc_copysign")}


def _wrap(p, name, kind, d):
    bits = D.bits(d)
    if D.is_signed(d):
        return _fn(f"{name}(x: i32) -> i32", f"return (x << {32 - bits}u) >> {32 - bits}u;",
                   f"an i32 result wrapped to {d} (two's complement, sign-extended)")
    return _fn(f"{name}(x: u32) -> u32", f"return x & 0x{(1 << bits) - 1:X}u;", f"a u32 result wrapped to {d}")


def _minmax(p, name, kind, d):
    cmp = "<" if kind == "min" else ">"
    tie = "=" if d == "float16" else ""
    p.need("qc_isnan")
    return _fn(f"{name}(a: f32, b: f32) -> f32", f"return select(b, a, a {cmp}{tie} b || qc_isnan(a));",
               f"np.{kind}imum: a NaN operand wins; on equal values (0.0, -0.0) NumPy's\n"
               f"{d} loop returns {'a' if d == 'float16' else 'b'}")


def _floordiv(p, name, kind, d):
    t = p.t(d)
    if D.is_float(d):
        p.need("qc_copysign")
        p.need("qc_fmod")
        body = """
if (b == 0.0f) { return a / b; }
let md = qc_fmod(a, b);
var div = (a - md) / b;
if (md != 0.0f && ((b < 0.0f) != (md < 0.0f))) { div -= 1.0f; }
if (div == 0.0f) { return qc_copysign(0.0f, a / b); }
let fl = floor(div);
return select(fl, fl + 1.0f, div - fl > 0.5f);"""
        return _fn(f"{name}(a: f32, b: f32) -> f32", body,
                   "np.floor_divide on floats: NumPy's npy_divmod (fmod-based, Python signs)")
    if D.is_unsigned(d):
        return _fn(f"{name}(a: u32, b: u32) -> u32", "return select(a / b, 0u, b == 0u);", "x // 0 -> 0 like NumPy")
    return _fn(f"{name}(a: i32, b: i32) -> i32", """
if (b == 0i) { return 0i; }
let q = a / b;
return select(q, q - 1i, q * b != a && ((a < 0i) != (b < 0i)));""",
               "Python floor division: WGSL truncates toward zero, so step down when signs differ;\n"
               f"x // 0 -> 0 and MIN // -1 -> MIN (wraps) like NumPy ({t} division by -1 wraps in WGSL)")


def _mod(p, name, kind, d):
    if D.is_float(d):
        p.need("qc_copysign")
        p.need("qc_fmod")
        return _fn(f"{name}(a: f32, b: f32) -> f32", """
let m = qc_fmod(a, b);
if (b == 0.0f) { return m; }
if (m == 0.0f) { return qc_copysign(0.0f, b); }
return select(m, m + b, (b < 0.0f) != (m < 0.0f));""", "np.remainder on floats: the result takes the sign of b")
    if D.is_unsigned(d):
        return _fn(f"{name}(a: u32, b: u32) -> u32", "return select(a % b, 0u, b == 0u);", "x % 0 -> 0 like NumPy")
    return _fn(f"{name}(a: i32, b: i32) -> i32", """
if (b == 0i) { return 0i; }
let r = a % b;
return select(r, r + b, r != 0i && ((r < 0i) != (b < 0i)));""",
               "Python modulo: the result takes the sign of b; x % 0 -> 0; MIN % -1 is 0 in WGSL")


def _pow(p, name, kind, d):
    t = p.t(d)
    neg = "if (b < 0i) { return 0i; }\n" if D.is_signed(d) else ""
    return _fn(f"{name}(a: {t}, b: {t}) -> {t}", f"""
{neg}var r = 1u;
var x = u32(a);
var e = u32(b);
while (e != 0u) {{
    if ((e & 1u) != 0u) {{ r *= x; }}
    x *= x;
    e >>= 1u;
}}
return {t}(r);""", "integer power by repeated squaring in u32 (wraps like NumPy; at most 32 steps)")


def _shift(p, name, kind, d):
    t, bits = p.t(d), D.bits(d)
    if kind == "lshift":
        body = f"return select({t}(0), a << (u32(b) & 31u), u32(b) < {bits}u);"
    elif D.is_signed(d):
        body = f"return select(select(0i, -1i, a < 0i), a >> (u32(b) & 31u), u32(b) < {bits}u);"
    else:
        body = f"return select(0u, a >> (u32(b) & 31u), u32(b) < {bits}u);"
    return _fn(f"{name}(a: {t}, b: {t}) -> {t}", body,
               "NumPy shifts: a count >= the bit width (or negative) shifts everything out")


def _cast(p, name, kind, d):
    """float -> integer as NumPy on x86-64 (codegen/expr.py Cast): int32 truncates and gives
    MIN for NaN/inf/out of range; narrower types go through int32 and wrap; uint32 goes
    through int64 and wraps (its low 32 bits, computed exactly in f32)."""
    if d == "int32":
        return _fn(f"{name}(x: f32) -> i32",
                   "return select(i32(-2147483648), i32(x), x >= -2147483648.0f && x < 2147483648.0f);",
                   "float -> int32 truncates; NaN/inf/out-of-range give MIN (as x86 does)")
    if d == "uint32":
        return _fn(f"{name}(x: f32) -> u32", """
if (!(abs(x) < 9223372036854775808.0f)) { return 0u; }
let t = trunc(abs(x));
let low = u32(t - floor(t / 4294967296.0f) * 4294967296.0f);
return select(low, 0u - low, x < 0.0f);""",
                   "float -> uint32 as x86-64: through int64 (NaN/out-of-range: MIN, whose low bits\n"
                   "are 0), then its low 32 bits (exact: t mod 2^32 is representable in f32)")
    via = p.need("qc_cast_int32")
    wrap = p.need(f"qc_wrap_{d}")
    t = p.t(d)
    conv = f"{t}({via}(x))" if t != "i32" else f"{via}(x)"
    return _fn(f"{name}(x: f32) -> {t}", f"return {wrap}({conv});",
               f"float -> {d}: through int32 (NaN/out-of-range: its MIN), then wraps, as NumPy on x86-64")
