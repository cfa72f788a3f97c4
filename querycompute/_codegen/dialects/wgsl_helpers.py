"""Semantic helper functions of the WGSL prelude: where WGSL and NumPy disagree.

`define(printer, name)` returns the WGSL source of helper `name`. WGSL defines more than C
(i32 overflow wraps, `a / 0` is `a`, `abs(MIN)` is MIN, float -> int conversions clamp),
but not what NumPy does: Python-signed // and %, x // 0 == 0, shifts by >= the bit width,
NaN-propagating min/max, x86's float -> int results, and NaN / inf tests (read from the bits,
so no driver can fold them away). Narrow integers (int8, uint16, ...) live in 32-bit
registers: `qc_wrap_<dtype>` brings a result back into its type's range.

Math functions: WGSL leaves their accuracy loose (exp: 3 + 2|x| ulp; log, sin, cos: an
absolute error) and drivers use the slack (lavapipe: sin(3e38) = -1, log(0.9992) 964 ulp
off, 51 ** 3 = 132651.08), so exp, log (log10, log1p, expm1), tanh and pow are series after
an exact range reduction, and sin / cos / tan reduce their argument exactly (Payne-Hanek)
before the driver's function on [-pi/4, pi/4]; each helper's comment says how.
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
var mx = qc_mant24(x);
var my = qc_mant24(y);
let ey = qc_exp24(y);
for (var e = qc_exp24(x) - ey; e > 0; e--) {
    if (mx >= my) { mx -= my; }
    mx <<= 1u;
}
if (mx >= my) { mx -= my; }
if (mx == 0u) { return qc_copysign(0.0f, x); }
let s = countLeadingZeros(mx) - 8u;                // the exact result mx * 2^(ey - 150), normalised
let er = ey - i32(s);
mx <<= s;
var b = (u32(max(er, 1)) << 23u) | (mx & 0x7FFFFFu);
if (er < 1) { b = mx >> u32(1 - er); }             // subnormal: exact (a multiple of 2^-149)
return bitcast<f32>(b | (bitcast<u32>(x) & 0x80000000u));""",
                   "C's fmod, exact: shift-and-subtract on the 24-bit mantissas (at most 277 steps), the\n"
                   "result built from its bits. WGSL's % on floats is a - b * trunc(a / b), which rounds;\n"
                   "frexp / ldexp lose subnormals on some drivers (lavapipe: fmod(1, 1e-45) was 2.9e-42)"),
    "qc_mant24": _fn("qc_mant24(x: f32) -> u32", """
let b = bitcast<u32>(x) & 0x7FFFFFFFu;
if (b < 0x800000u) { return b << (countLeadingZeros(b) - 8u); }
return (b & 0x7FFFFFu) | 0x800000u;""",
                     "|x| = qc_mant24(x) * 2^(qc_exp24(x) - 150) for finite x != 0, the mantissa in [2^23, 2^24)\n"
                     "(subnormals normalised), read from the bits"),
    "qc_exp24": _fn("qc_exp24(x: f32) -> i32", """
let b = bitcast<u32>(x) & 0x7FFFFFFFu;
if (b < 0x800000u) { return 9 - i32(countLeadingZeros(b)); }
return i32(b >> 23u);""", "the exponent that goes with qc_mant24"),
    "qc_exact": _fn("qc_exact(x: f32) -> f32", "return bitcast<f32>(bitcast<u32>(x) | qc_zero);",
                    "x itself, its bits or-ed with qc_zero: 0, but unknown to the compiler (wgsl.py),\n"
                    "so a driver that treats WGSL arithmetic as inexact cannot rewrite the operation that\n"
                    "made x together with the one that uses it (lavapipe computed (a - b) + b as a and\n"
                    "b + 3.0 + 3.0 as b + 6.0)"),
    "qc_div_zero": _fn("qc_div_zero(a: f32, b: f32) -> f32", """
let r = bitcast<f32>(((bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u) | 0x7F800000u);
return select(r, qc_f32_bits(0x7FC00000u), qc_isnan(a) || a == 0.0f);""",
                        "a / b for b = +-0, from the bits: lavapipe folds a / 0.0 to 0 when it sees the zero"),
    "qc_exp": _fn("qc_exp(x: f32) -> f32", """
if (qc_isnan(x)) { return x; }
if (x > 88.72284f) { return bitcast<f32>(0x7F800000u); }
if (x < -103.97208f) { return 0.0f; }
let k = round(x * 1.4426950408889634f);
let r = (x - k * 0.693145751953125f) - k * 1.4286068203094172e-06f;   // ln 2 in two parts: k * hi exact
let p = 1.0f + r * (1.0f + r * (0.5f + r * (0.16666666666f + r * (0.041666666666f + r * (0.0083333333333f
        + r * (0.0013888888889f + r * 0.0001984126984f))))));
let ki = i32(k);
return ldexp(ldexp(p, ki / 2), ki - ki / 2);""",
                  "e^x to about 1 ulp: 2^k * e^r, |r| <= ln2 / 2, by its series (WGSL allows exp an error\n"
                  "of 3 + 2|x| ulp; lavapipe's is 50 ulp off at x = 66); two ldexp steps reach subnormals"),
    "qc_log_parts": _fn("qc_log_parts(x: f32) -> vec2<f32>", """
// x = m * 2^e from the bits (frexp loses subnormals on some drivers: lavapipe's)
let b = bitcast<u32>(x);
var mant = b & 0x7FFFFFu;
var e = i32(b >> 23u) - 127;
if ((b >> 23u) == 0u) {                            // subnormal: normalise the mantissa
    let s = countLeadingZeros(mant) - 8u;
    mant = (mant << s) & 0x7FFFFFu;
    e = -126 - i32(s);
}
var m = bitcast<f32>(mant | 0x3F800000u);         // [1, 2)
if (m > 1.41421356f) { m = m * 0.5f; e = e + 1; }  // m in [sqrt(1/2), sqrt(2)]
let s = (m - 1.0f) / (m + 1.0f);
let s2 = s * s;
let lm = 2.0f * s * (1.0f + s2 * (0.33333333333f + s2 * (0.2f + s2 * (0.14285714286f + s2 * (0.11111111111f
         + s2 * 0.09090909091f)))));
return vec2<f32>(f32(e), lm);""",
                        "(e, ln m) with x = m 2^e, m in [sqrt(1/2), sqrt(2)], for finite x > 0: ln m =\n"
                        "2 atanh((m - 1) / (m + 1)) by its series, to about 1 ulp"),
    "qc_log": _fn("qc_log(x: f32) -> f32", """
if (!(x > 0.0f) || x > 3.4028235e38f) { return log(x); }      // NaN, <= 0, inf: the driver's
let p = qc_log_parts(x);
return p.x * 0.693145751953125f + (p.y + p.x * 1.4286068203094172e-06f);""",
                  "ln x to about 1 ulp: e ln 2 + ln m (WGSL's log has an absolute error bound: lavapipe's\n"
                  "is 964 ulp off at 0.9992)"),
    "qc_log2": _fn("qc_log2(x: f32) -> f32", """
if (!(x > 0.0f) || x > 3.4028235e38f) { return log2(x); }     // NaN, <= 0, inf: the driver's
let p = qc_log_parts(x);
return p.x + p.y * 1.4426950408889634f;""",
                   "log2 x = e + ln m / ln 2, exact at powers of two (lavapipe's log2 was 575 ulp off at\n"
                   "0.998 and gave -127 for 1e-45, not -149)"),
    "qc_expm1": _fn("qc_expm1(x: f32) -> f32", """
let u = qc_exp(x);
if (u == 1.0f) { return x; }
if (u > 3.4028235e38f) { return u; }          // inf: inf / log(inf) would be NaN
let um1 = u - 1.0f;
if (um1 == -1.0f) { return -1.0f; }
return um1 * (x / qc_log(u));""", "exp(x) - 1 without cancellation near 0 (WGSL has no expm1; Kahan's trick)"),
    "qc_tanh": _fn("qc_tanh(x: f32) -> f32", """
let a = abs(x);
if (a < 0.000244140625f) { return x; }
if (a > 9.1f) { return qc_copysign(1.0f, x); }
if (a >= 0.55f) { return qc_copysign(1.0f - 2.0f / (qc_exp(2.0f * a) + 1.0f), x); }
let b = a * 0.25f;
let b2 = b * b;
var t = b * (1.0f + b2 * (-0.33333333333f + b2 * (0.13333333333f + b2 * (-0.05396825397f + b2 * 0.02186948854f))));
t = 2.0f * t / (1.0f + t * t);
t = 2.0f * t / (1.0f + t * t);
return qc_copysign(t, x);""",
                   "tanh without the driver's (e^2x - 1) / (e^2x + 1), which cancels near 0 (lavapipe:\n"
                   "tanh(1e-38) = 3e-8): below 0.55 the series at a / 4 doubled twice (tanh 2u = 2t / (1 + t^2)),\n"
                   "above it 1 - 2 / (e^2a + 1); below 2^-12 tanh(x) rounds to x, above 9.1 to +-1"),
    "qc_mul_wide": _fn("qc_mul_wide(a: u32, b: u32) -> vec2<u32>", """
let a0 = a & 0xFFFFu;
let a1 = a >> 16u;
let b0 = b & 0xFFFFu;
let b1 = b >> 16u;
let p00 = a0 * b0;
let p01 = a0 * b1;
let p10 = a1 * b0;
let mid = (p00 >> 16u) + (p01 & 0xFFFFu) + (p10 & 0xFFFFu);
return vec2<u32>((p00 & 0xFFFFu) | (mid << 16u), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));""",
                       "(low, high) words of the 64-bit product a * b"),
    "qc_reduce_pio2": _fn("qc_reduce_pio2(ax: f32) -> vec2<f32>", """
// Payne-Hanek: ax * 2/pi mod 4 from 96 bits of 2/pi in integer arithmetic; ax >= pi/4, finite.
var t = array<u32, 8>(0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u, 0xF534DDC0u,
                      0xDB629599u, 0x3C439041u, 0xFE5163ABu, 0xDEBBC561u);
let bits = bitcast<u32>(ax);
let m = (bits & 0x7FFFFFu) | 0x800000u;           // ax = m * 2^e2
let e2 = i32(bits >> 23u) - 150;
let s = max(e2 - 2, 0);                            // 2/pi's bits above s only add multiples of 4
let w = s / 32;
let o = u32(s % 32);
var f: array<u32, 3>;
for (var k = 0; k < 3; k++) {
    f[k] = select((t[w + k] << o) | (t[w + k + 1] >> (32u - o)), t[w + k], o == 0u);
}
let p2 = qc_mul_wide(m, f[2]);
let p1 = qc_mul_wide(m, f[1]);
let p0 = qc_mul_wide(m, f[0]);
let w1 = p1.x + p2.y;
let c1 = p1.y + select(0u, 1u, w1 < p2.y);
let w2 = p0.x + c1;
let w3 = p0.y + select(0u, 1u, w2 < c1);
// (w3 w2 w1 ...) = m * F; y / 4 = that * 2^(e2 - s - 98): its 64 fraction bits are (hi, lo)
let sh = u32(e2 - s + 30);
var hi = w2;
var lo = w1;
if (sh < 32u) {
    hi = (w3 << sh) | (w2 >> (32u - sh));
    lo = (w2 << sh) | (w1 >> (32u - sh));
}
var q = hi >> 30u;                                 // the quadrant
var fh = (hi << 2u) | (lo >> 30u);                 // the angle in quadrants, 64-bit fixed point
var fl = lo << 2u;
var sign = 1.0f;
if ((fh & 0x80000000u) != 0u) {                    // >= half a quadrant: r - 1, next quadrant
    q = q + 1u;
    fh = ~fh;
    fl = ~fl + 1u;
    if (fl == 0u) { fh = fh + 1u; }
    sign = -1.0f;
}
let frac = f32(fh) * 2.3283064365386963e-10f + f32(fl) * 5.421010862427522e-20f;
return vec2<f32>(sign * frac * 1.5707963267948966f, f32(q & 3u));""",
                          "(r, quadrant) with ax = r + quadrant * pi/2 (mod 2 pi), |r| <= pi/4:\n"
                          "drivers reduce large arguments of sin / cos / tan inexactly (lavapipe: sin(3e38) = -1)"),
    "qc_sin": _fn("qc_sin(x: f32) -> f32", """
let a = abs(x);
if (a <= 0.7853981633974483f || a > 3.4028235e38f || qc_isnan(x)) { return sin(x); }
let rq = qc_reduce_pio2(a);
let q = u32(rq.y);
var v = select(sin(rq.x), cos(rq.x), (q & 1u) == 1u);
if (q >= 2u) { v = -v; }
return select(v, -v, x < 0.0f);""", "sin with an exact argument reduction"),
    "qc_cos": _fn("qc_cos(x: f32) -> f32", """
let a = abs(x);
if (a <= 0.7853981633974483f || a > 3.4028235e38f || qc_isnan(x)) { return cos(x); }
let rq = qc_reduce_pio2(a);
let q = u32(rq.y);
let v = select(cos(rq.x), sin(rq.x), (q & 1u) == 1u);
return select(v, -v, q == 1u || q == 2u);""", "cos with an exact argument reduction"),
    "qc_tan": _fn("qc_tan(x: f32) -> f32", """
let a = abs(x);
if (a <= 0.7853981633974483f || a > 3.4028235e38f || qc_isnan(x)) { return tan(x); }
let rq = qc_reduce_pio2(a);
let v = select(tan(rq.x), -1.0f / tan(rq.x), (u32(rq.y) & 1u) == 1u);
return select(v, -v, x < 0.0f);""", "tan with an exact argument reduction"),
    "qc_log1p": _fn("qc_log1p(x: f32) -> f32", """
// the select keeps the driver from folding (1 + x) - 1 into x (lavapipe's NIR treats WGSL
// arithmetic as inexact and does): u must be the rounded sum
let u = select(1.0f + x, x, x > 3.4028235e38f);
if (u == 1.0f) { return x; }
if (u > 3.4028235e38f) { return u; }          // inf: inf * inf / inf would be NaN
return qc_log(u) * (x / (u - 1.0f));""", "log(1 + x) without cancellation near 0 (WGSL has no log1p)"),
    "qc_log10": _fn("qc_log10(x: f32) -> f32", "return qc_log(x) * 0.4342944819032518f;",
                    "log10 (WGSL has none)"),
    "qc_hypot": _fn("qc_hypot(a0: f32, b0: f32) -> f32", """
let a = abs(a0);
let b = abs(b0);
if (qc_isinf(a) || qc_isinf(b)) { return bitcast<f32>(0x7F800000u); }
// WGSL's max/min may return the other operand for a NaN (lavapipe does: hypot(1, NaN) was
// sqrt(2)), so NaN is answered before them
if (qc_isnan(a) || qc_isnan(b)) { return qc_f32_bits(0x7FC00000u); }
let m = max(a, b);
if (m == 0.0f) { return 0.0f; }
let r = min(a, b) / m;
return m * sqrt(1.0f + r * r);""", "sqrt(a*a + b*b) without overflow; inf wins over NaN as in C"),
    "qc_atan2": _fn("qc_atan2(y: f32, x: f32) -> f32", """
if (qc_isnan(x) || qc_isnan(y)) { return qc_f32_bits(0x7FC00000u); }
let xneg = (bitcast<u32>(x) & 0x80000000u) != 0u;     // -0.0 counts as negative, as in C
if (y == 0.0f) { return select(y, qc_copysign(3.1415927f, y), xneg); }
if (x == 0.0f) { return qc_copysign(1.5707964f, y); }
if (qc_isinf(x)) {
    if (qc_isinf(y)) { return qc_copysign(select(0.7853982f, 2.3561945f, xneg), y); }
    return qc_copysign(select(0.0f, 3.1415927f, xneg), y);
}
if (qc_isinf(y)) { return qc_copysign(1.5707964f, y); }
let r = qc_atan_core(y / x);
if (!xneg) { return r; }
return select(r - 3.1415927f, r + 3.1415927f, y > 0.0f);""",
                    "C's atan2: WGSL's leaves zeros, infinities and NaN undefined (lavapipe gave\n"
                    "atan2(0, 0) = 3pi/4 and atan2(0, NaN) = 0) and is 40 ulp off at (1, 1); finite\n"
                    "cases are atan(y / x) (qc_atan_core), +-pi for x < 0"),
    "qc_pow": _fn("qc_pow(x: f32, y: f32) -> f32", """
if (y == 0.0f || x == 1.0f) { return 1.0f; }
if (qc_isnan(x) || qc_isnan(y)) { return x + y; }
let odd = trunc(y) == y && abs(y) < 16777216.0f && (i32(abs(y)) & 1) == 1;
let ax = abs(x);
let ay = abs(y);
var r: f32;
if (trunc(2.0f * ay) == 2.0f * ay && ay <= 8.0f) {
    // integer and half-integer exponents up to 8: squarings (and a sqrt), a few roundings
    var p = 1.0f;
    let base = select(ax, 1.0f / ax, y < 0.0f);   // (1/x)^k: x^k may overflow where x^-k does not
    var b = base;
    for (var k = u32(ay); k > 0u; k = k >> 1u) {
        if ((k & 1u) == 1u) { p = p * b; }
        b = b * b;
    }
    if (ay != trunc(ay)) { p = p * sqrt(base); }
    r = p;
} else {
    // 0 / inf bases give -inf / inf logs: 0 or inf; |x| == 1 stays 1 (even for y = +-inf)
    r = select(qc_exp(y * qc_log(ax)), 1.0f, ax == 1.0f);
}
if (x < 0.0f || (x == 0.0f && (bitcast<u32>(x) & 0x80000000u) != 0u)) {
    if (trunc(y) != y && x != 0.0f && ax <= 3.4028235e38f) { return qc_f32_bits(0x7FC00000u); }
    return select(r, -r, odd);
}
return r;""", "C's pow: WGSL's pow is exp2(y * log2(x)), undefined for x < 0, and on lavapipe\n"
                "not within a few ulp (51 ** 3 = 132651.08); here e^(y ln|x|) from the helpers above\n"
                "(about |y ln x| + 2 ulp), and products for exponents k / 2 up to 8 (a few roundings)"),
}
# WGSL helpers for the hyperbolic and inverse functions whose WGSL builtins break NumPy's
# special values (checked on lavapipe against NumPy): atan(NaN) was 0 and atan(-0.0) +0.0;
# sinh(1e-30) was 3e-8 (e^x - e^-x cancels); asinh and acosh overflowed to inf from about
# 1e19 (x * x); atanh(1e-30) was 0. Each helper handles NaN, signed zeros and infinities as C
# does and computes through the accurate exp / expm1 / log / log1p helpers above:
#
#   sinh x  = sign(x) (t + t / (t + 1)) / 2 with t = expm1|x|   (|x| < 22; beyond, e^|x|/2
#             as (e^(|x|/2) / 2) e^(|x|/2), finite up to 89.4 where e^|x| is not)
#   cosh x  = (t + 1 / t) / 2 with t = e^|x|, beyond 22 as sinh   (lavapipe's cosh overflowed
#             from 88.73 and was 6 ulp off at 11.09)
#   asinh x = sign(x) log1p(a + a^2 / (1 + sqrt(1 + a^2)))      (a = |x|; beyond 1e18,
#             log a + ln 2, which is exact to rounding there)
#   acosh x = log1p(t + sqrt(2t + t^2)), t = x - 1             (beyond 1e18, log x + ln 2)
#   atanh x = sign(x) log1p(2a / (1 - a)) / 2
#   atan x  = Cephes' atanf (a reduction to |t| <= tan(pi/8) and a degree-9 odd polynomial,
#             about 2 ulp), NaN passed through, the sign of x kept: lavapipe's atan was 2e-5
#             relative off at 1e-30, and its asin 4e-4 off at 0.5 (WGSL allows 4096 ulp)
#   asin x  = atan2(x, sqrt((1 - x)(1 + x))),  acos x = atan2(sqrt((1 - x)(1 + x)), x), with
#             qc_atan2 above (C's special values) on this atan
_SIMPLE.update({
    "qc_sinh": _fn("qc_sinh(x: f32) -> f32", """
if (qc_isnan(x)) { return x; }
let a = abs(x);
var r: f32;
if (a < 22.0f) {
    let t = qc_expm1(a);
    r = 0.5f * (t + t / (t + 1.0f));
} else {
    let h = qc_exp(0.5f * a);
    r = (0.5f * h) * h;
}
return qc_copysign(r, x);""", "sinh without cancellation near 0 (wgsl_helpers.py)"),
    "qc_cosh": _fn("qc_cosh(x: f32) -> f32", """
if (qc_isnan(x)) { return x; }
let a = abs(x);
if (a < 22.0f) {
    let t = qc_exp(a);
    return 0.5f * (t + 1.0f / t);
}
let h = qc_exp(0.5f * a);
return (0.5f * h) * h;""", "cosh without overflow below 89.4 (wgsl_helpers.py)"),
    "qc_arcsinh": _fn("qc_arcsinh(x: f32) -> f32", """
if (qc_isnan(x)) { return x; }
let a = abs(x);
var r: f32;
if (a > 1.0e18f) {
    r = qc_log(a) + 0.6931472f;
} else {
    r = qc_log1p(a + a * a / (1.0f + sqrt(1.0f + a * a)));
}
return qc_copysign(r, x);""", "asinh without overflow or cancellation (wgsl_helpers.py)"),
    "qc_arccosh": _fn("qc_arccosh(x: f32) -> f32", """
if (qc_isnan(x) || x < 1.0f) { return qc_f32_bits(0x7FC00000u); }
if (x > 1.0e18f) { return qc_log(x) + 0.6931472f; }
let t = x - 1.0f;
return qc_log1p(t + sqrt(2.0f * t + t * t));""", "acosh without overflow (wgsl_helpers.py)"),
    "qc_arctanh": _fn("qc_arctanh(x: f32) -> f32", """
let a = abs(x);
if (qc_isnan(x) || a > 1.0f) { return qc_f32_bits(0x7FC00000u); }
if (a == 1.0f) { return qc_copysign(bitcast<f32>(0x7F800000u), x); }
return qc_copysign(0.5f * qc_log1p(2.0f * a / (1.0f - a)), x);""",
                       "atanh without cancellation near 0 (wgsl_helpers.py)"),
    "qc_atan_core": _fn("qc_atan_core(x: f32) -> f32", """
let a = abs(x);
var y0 = 0.0f;
var t = a;
if (a > 2.4142137f) {
    y0 = 1.5707964f;
    t = -1.0f / a;
} else if (a > 0.41421357f) {
    y0 = 0.7853982f;
    t = (a - 1.0f) / (a + 1.0f);
}
let z = t * t;
let p = (((0.0805374449538f * z - 0.138776856032f) * z + 0.199777106478f) * z - 0.333329491539f) * z * t + t;
return qc_copysign(y0 + p, x);""", "Cephes' atanf for a non-NaN x (wgsl_helpers.py)"),
    "qc_arctan": _fn("qc_arctan(x: f32) -> f32", """
if (qc_isnan(x)) { return x; }
return qc_atan_core(x);""", "atan, about 2 ulp, NaN and the sign of zero kept (wgsl_helpers.py)"),
    "qc_arcsin": _fn("qc_arcsin(x: f32) -> f32", """
if (qc_isnan(x) || abs(x) > 1.0f) { return qc_f32_bits(0x7FC00000u); }
return qc_atan2(x, sqrt((1.0f - x) * (1.0f + x)));""", "asin through atan2 (wgsl_helpers.py)"),
    "qc_arccos": _fn("qc_arccos(x: f32) -> f32", """
if (qc_isnan(x) || abs(x) > 1.0f) { return qc_f32_bits(0x7FC00000u); }
return qc_atan2(sqrt((1.0f - x) * (1.0f + x)), x);""", "acos through atan2 (wgsl_helpers.py)"),
    "qc_exp2": _fn("qc_exp2(x: f32) -> f32", """
if (qc_isnan(x)) { return x; }
if (x >= 128.0f) { return bitcast<f32>(0x7F800000u); }
if (x < -150.0f) { return 0.0f; }
let k = round(x);
let p = qc_exp((x - k) * 0.6931471805599453f);     // x - k is exact, |x - k| <= 1/2
let ki = i32(k);
return ldexp(ldexp(p, ki / 2), ki - ki / 2);""",
                   "2^x to about 1 ulp: 2^k * e^(r ln 2) with k = round(x) (exact at integers, subnormals\n"
                   "by two ldexp steps); WGSL's exp2 has exp's loose bound"),
    "qc_cbrt": _fn("qc_cbrt(x: f32) -> f32", """
if (x == 0.0f || qc_isnan(x) || qc_isinf(x)) { return x; }
let a = bitcast<f32>(bitcast<u32>(x) & 0x7FFFFFFFu);
var y = exp2(qc_log2(a) * 0.33333334f);
y = y + (a / (y * y) - y) * 0.33333334f;
y = y + (a / (y * y) - y) * 0.33333334f;
return qc_copysign(y, x);""",
                   "cube root (WGSL has none), about 1 ulp: 2^(log2|x| / 3), then two Newton steps\n"
                   "y += (a / y^2 - y) / 3; zeros, NaN and infinities as C's cbrt; the sign of x"),
})
_DEPS = {"qc_hypot": ("qc_isinf", "qc_isnan", "qc_f32_bits"),
         "qc_atan2": ("qc_isnan", "qc_isinf", "qc_copysign", "qc_f32_bits", "qc_atan_core"),
         "qc_pow": ("qc_isnan", "qc_f32_bits", "qc_exp", "qc_log"),
         "qc_fmod": ("qc_isnan", "qc_isinf", "qc_f32_bits", "qc_copysign", "qc_mant24", "qc_exp24"),
         "qc_div_zero": ("qc_isnan", "qc_f32_bits"), "qc_log2": ("qc_log_parts",), "qc_log": ("qc_log_parts",),
         "qc_tanh": ("qc_copysign", "qc_exp"), "qc_log10": ("qc_log",), "qc_exp": ("qc_isnan",),
         "qc_expm1": ("qc_exp", "qc_log"), "qc_log1p": ("qc_log",), "qc_reduce_pio2": ("qc_mul_wide",),
         "qc_sin": ("qc_reduce_pio2", "qc_isnan"), "qc_cos": ("qc_reduce_pio2", "qc_isnan"),
         "qc_tan": ("qc_reduce_pio2", "qc_isnan"),"qc_sinh": ("qc_isnan", "qc_expm1", "qc_exp", "qc_copysign"), "qc_cosh": ("qc_isnan", "qc_exp"),
        "qc_arcsinh": ("qc_isnan", "qc_log", "qc_log1p", "qc_copysign"),
        "qc_arccosh": ("qc_isnan", "qc_f32_bits", "qc_log", "qc_log1p"),
        "qc_arctanh": ("qc_isnan", "qc_f32_bits", "qc_log1p", "qc_copysign"),
        "qc_atan_core": ("qc_copysign",), "qc_arctan": ("qc_isnan", "qc_atan_core"),
        "qc_arcsin": ("qc_isnan", "qc_f32_bits", "qc_atan2"),
        "qc_arccos": ("qc_isnan", "qc_f32_bits", "qc_atan2"),
        "qc_exp2": ("qc_isnan", "qc_exp"), "qc_cbrt": ("qc_isnan", "qc_isinf", "qc_log2", "qc_copysign")}


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
        p.need("qc_fmod")
        p.need("qc_div_zero")
        body = """
if (b == 0.0f) { return qc_div_zero(a, b); }
let md = qc_fmod(a, b);
var div = (a - md) / b;
if (md != 0.0f && ((b < 0.0f) != (md < 0.0f))) { div -= 1.0f; }
// a zero takes the sign of a / b from the bits: a / b folds to +0 where a is the literal 0.0
if (div == 0.0f) { return bitcast<f32>((bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u); }
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
