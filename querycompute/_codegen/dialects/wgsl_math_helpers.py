"""WGSL helpers for the hyperbolic and inverse functions whose WGSL builtins break NumPy's
special values (checked on lavapipe against NumPy): atan(NaN) was 0 and atan(-0.0) +0.0;
sinh(1e-30) was 3e-8 (e^x - e^-x cancels); asinh and acosh overflowed to inf from about
1e19 (x * x); atanh(1e-30) was 0. Each helper handles NaN, signed zeros and infinities as C
does and computes through the accurate exp / expm1 / log / log1p helpers of wgsl_helpers:

  sinh x  = sign(x) (t + t / (t + 1)) / 2 with t = expm1|x|   (|x| < 22; beyond, e^|x|/2
            as (e^(|x|/2) / 2) e^(|x|/2), finite up to 89.4 where e^|x| is not)
  asinh x = sign(x) log1p(a + a^2 / (1 + sqrt(1 + a^2)))      (a = |x|; beyond 1e18,
            log a + ln 2, which is exact to rounding there)
  acosh x = log1p(t + sqrt(2t + t^2)), t = x - 1             (beyond 1e18, log x + ln 2)
  atanh x = sign(x) log1p(2a / (1 - a)) / 2
  atan x  = WGSL's atan with NaN passed through and the sign of x kept (so atan(-0.0) = -0.0)
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
    "qc_arctan": _fn("qc_arctan(x: f32) -> f32", """
if (qc_isnan(x)) { return x; }
return qc_copysign(atan(x), x);""", "atan with NaN and the sign of zero kept (module docstring)"),
}
DEPS = {"qc_sinh": ("qc_isnan", "qc_expm1", "qc_exp", "qc_copysign"),
        "qc_arcsinh": ("qc_isnan", "qc_log", "qc_log1p", "qc_copysign"),
        "qc_arccosh": ("qc_isnan", "qc_f32_bits", "qc_log", "qc_log1p"),
        "qc_arctanh": ("qc_isnan", "qc_f32_bits", "qc_log1p", "qc_copysign"),
        "qc_arctan": ("qc_isnan", "qc_copysign")}
