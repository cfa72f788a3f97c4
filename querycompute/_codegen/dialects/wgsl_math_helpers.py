"""WGSL helpers for the hyperbolic and inverse functions whose WGSL builtins break NumPy's
special values (checked on lavapipe against NumPy): atan(NaN) was 0 and atan(-0.0) +0.0;
sinh(1e-30) was 3e-8 (e^x - e^-x cancels); asinh and acosh overflowed to inf from about
1e19 (x * x); atanh(1e-30) was 0. Each helper handles NaN, signed zeros and infinities as C
does and computes through the accurate exp / expm1 / log / log1p helpers of wgsl_helpers:

  sinh x  = sign(x) (t + t / (t + 1)) / 2 with t = expm1|x|   (|x| < 22; beyond, e^|x|/2
            as (e^(|x|/2) / 2) e^(|x|/2), finite up to 89.4 where e^|x| is not)
  cosh x  = (t + 1 / t) / 2 with t = e^|x|, beyond 22 as sinh   (lavapipe's cosh overflowed
            from 88.73 and was 6 ulp off at 11.09)
  asinh x = sign(x) log1p(a + a^2 / (1 + sqrt(1 + a^2)))      (a = |x|; beyond 1e18,
            log a + ln 2, which is exact to rounding there)
  acosh x = log1p(t + sqrt(2t + t^2)), t = x - 1             (beyond 1e18, log x + ln 2)
  atanh x = sign(x) log1p(2a / (1 - a)) / 2
  atan x  = Cephes' atanf (a reduction to |t| <= tan(pi/8) and a degree-9 odd polynomial,
            about 2 ulp), NaN passed through, the sign of x kept: lavapipe's atan was 2e-5
            relative off at 1e-30, and its asin 4e-4 off at 0.5 (WGSL allows 4096 ulp)
  asin x  = atan2(x, sqrt((1 - x)(1 + x))),  acos x = atan2(sqrt((1 - x)(1 + x)), x), with
            wgsl_helpers' qc_atan2 (C's special values) on this atan
"""
from __future__ import annotations

from .wgsl_helpers import _fn

HELPERS = {
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
return qc_copysign(r, x);""", "sinh without cancellation near 0 (module docstring)"),
    "qc_cosh": _fn("qc_cosh(x: f32) -> f32", """
if (qc_isnan(x)) { return x; }
let a = abs(x);
if (a < 22.0f) {
    let t = qc_exp(a);
    return 0.5f * (t + 1.0f / t);
}
let h = qc_exp(0.5f * a);
return (0.5f * h) * h;""", "cosh without overflow below 89.4 (module docstring)"),
    "qc_arcsinh": _fn("qc_arcsinh(x: f32) -> f32", """
if (qc_isnan(x)) { return x; }
let a = abs(x);
var r: f32;
if (a > 1.0e18f) {
    r = qc_log(a) + 0.6931472f;
} else {
    r = qc_log1p(a + a * a / (1.0f + sqrt(1.0f + a * a)));
}
return qc_copysign(r, x);""", "asinh without overflow or cancellation (module docstring)"),
    "qc_arccosh": _fn("qc_arccosh(x: f32) -> f32", """
if (qc_isnan(x) || x < 1.0f) { return qc_f32_bits(0x7FC00000u); }
if (x > 1.0e18f) { return qc_log(x) + 0.6931472f; }
let t = x - 1.0f;
return qc_log1p(t + sqrt(2.0f * t + t * t));""", "acosh without overflow (module docstring)"),
    "qc_arctanh": _fn("qc_arctanh(x: f32) -> f32", """
let a = abs(x);
if (qc_isnan(x) || a > 1.0f) { return qc_f32_bits(0x7FC00000u); }
if (a == 1.0f) { return qc_copysign(bitcast<f32>(0x7F800000u), x); }
return qc_copysign(0.5f * qc_log1p(2.0f * a / (1.0f - a)), x);""",
                       "atanh without cancellation near 0 (module docstring)"),
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
return qc_copysign(y0 + p, x);""", "Cephes' atanf for a non-NaN x (module docstring)"),
    "qc_arctan": _fn("qc_arctan(x: f32) -> f32", """
if (qc_isnan(x)) { return x; }
return qc_atan_core(x);""", "atan, about 2 ulp, NaN and the sign of zero kept (module docstring)"),
    "qc_arcsin": _fn("qc_arcsin(x: f32) -> f32", """
if (qc_isnan(x) || abs(x) > 1.0f) { return qc_f32_bits(0x7FC00000u); }
return qc_atan2(x, sqrt((1.0f - x) * (1.0f + x)));""", "asin through atan2 (module docstring)"),
    "qc_arccos": _fn("qc_arccos(x: f32) -> f32", """
if (qc_isnan(x) || abs(x) > 1.0f) { return qc_f32_bits(0x7FC00000u); }
return qc_atan2(sqrt((1.0f - x) * (1.0f + x)), x);""", "acos through atan2 (module docstring)"),
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
}
DEPS = {"qc_sinh": ("qc_isnan", "qc_expm1", "qc_exp", "qc_copysign"), "qc_cosh": ("qc_isnan", "qc_exp"),
        "qc_arcsinh": ("qc_isnan", "qc_log", "qc_log1p", "qc_copysign"),
        "qc_arccosh": ("qc_isnan", "qc_f32_bits", "qc_log", "qc_log1p"),
        "qc_arctanh": ("qc_isnan", "qc_f32_bits", "qc_log1p", "qc_copysign"),
        "qc_atan_core": ("qc_copysign",), "qc_arctan": ("qc_isnan", "qc_atan_core"),
        "qc_arcsin": ("qc_isnan", "qc_f32_bits", "qc_atan2"),
        "qc_arccos": ("qc_isnan", "qc_f32_bits", "qc_atan2"),
        "qc_exp2": ("qc_isnan", "qc_exp"), "qc_cbrt": ("qc_isnan", "qc_isinf", "qc_log2", "qc_copysign")}
