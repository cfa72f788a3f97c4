"""Semantic helper functions of the C-family prelude, generic over the dialect's type names.

`define(printer, name)` returns the C source of helper `name` ("qc_<what>_<dtype>"), spelled
with the printer's types, literals and math names. A dialect may supply its own definition
as a method `define_<name>` (e.g. float16 rounding, which each dialect spells natively).
These are the places where C and NumPy disagree: C truncates division, traps or is undefined
on overflow, shifts >= width and float->int overflow; NumPy defines them all.
"""
from __future__ import annotations

from .. import dtypes as D


def define(p, name: str) -> str:
    own = getattr(p, f"define_{name}", None)
    if own is not None:
        return own()
    if name == "qc_round_f64_f16":
        return _round_f64_f16(p)
    kind, _, rest = name[3:].partition("_")
    if kind == "cast":
        src, dst = rest.split("_")
        return _cast_float_int(p, name, src, dst)
    maker = {"abs": _abs, "min": _minmax, "max": _minmax, "floordiv": _floordiv,
             "mod": _mod, "pow": _pow, "lshift": _shift, "rshift": _shift}[kind]
    return maker(p, name, kind, rest)


def _fn(p, ret: str, name: str, params: str, body: str, why: str) -> str:
    lines = body.strip("\n").splitlines()
    inner = "\n".join("    " + ln for ln in lines)
    return f"// {why}\n{p.FUNC} {ret} {name}({params}) {{\n{inner}\n}}"


def _abs(p, name, kind, d):
    t, w = p.t(d), p.wide_unsigned(d)
    return _fn(p, t, name, f"{t} a", f"return a < 0 ? ({t})(({w})0 - ({w})a) : a;",
               "abs wraps like NumPy: abs(MIN) == MIN (negated in unsigned arithmetic)")


def _minmax(p, name, kind, d):
    t = p.t(d)
    cmp = "<=" if kind == "min" else ">="
    if D.is_float(d):
        # a tie (0.0 against -0.0) returns b in NumPy's float32/64 loops but a in its half loop
        strict = cmp if d == "float16" else cmp[0]
        return _fn(p, t, name, f"{t} a, {t} b", f"return (a {strict} b || isnan(a)) ? a : b;",
                   f"np.{kind}imum: a NaN operand wins; on equal values (0.0, -0.0) NumPy's"
                   f"\n// {d} loop returns {'a' if d == 'float16' else 'b'}")
    return _fn(p, t, name, f"{t} a, {t} b", f"return a {cmp} b ? a : b;", f"np.{kind}imum on integers")


def _floordiv(p, name, kind, d):
    t = p.t(d)
    if d == "float16":
        return _fn(p, t, name, f"{t} a, {t} b",
                   f"return {p.round_f16(p.need('qc_floordiv_float32') + '(a, b)')};",
                   "float16 floor division: computed in float32, rounded to half")
    if D.is_float(d):
        fmod, floor, copysign = (p.math(f, d) for f in ("fmod", "floor", "copysign"))
        one, half, zero = (p.literal(v, d) for v in (1.0, 0.5, 0.0))
        return _fn(p, t, name, f"{t} a, {t} b", f"""
if (b == {zero}) return a / b;
{t} mod = {fmod}(a, b);
{t} div = (a - mod) / b;
if (mod != {zero} && ((b < {zero}) != (mod < {zero}))) div -= {one};
if (div == {zero}) return {copysign}({zero}, a / b);
{t} fl = {floor}(div);
return (div - fl > {half}) ? fl + {one} : fl;""",
                   "np.floor_divide on floats: NumPy's npy_divmod (fmod-based, Python signs)")
    if D.is_unsigned(d):
        return _fn(p, t, name, f"{t} a, {t} b", "return b == 0 ? 0 : a / b;", "x // 0 -> 0 like NumPy")
    w = p.wide_unsigned(d)
    return _fn(p, t, name, f"{t} a, {t} b", f"""
if (b == 0) return 0;
if (b == -1) return ({t})(({w})0 - ({w})a);
{t} q = a / b;
return (q * b != a && ((a < 0) != (b < 0))) ? ({t})(q - 1) : q;""",
               "Python floor division: C truncates toward zero, so step down when signs differ;\n"
               "// x // 0 -> 0 and MIN // -1 -> MIN (wraps) like NumPy, never a trap")


def _mod(p, name, kind, d):
    t = p.t(d)
    if d == "float16":
        return _fn(p, t, name, f"{t} a, {t} b",
                   f"return {p.round_f16(p.need('qc_mod_float32') + '(a, b)')};",
                   "float16 remainder: computed in float32, rounded to half")
    if D.is_float(d):
        fmod, copysign = p.math("fmod", d), p.math("copysign", d)
        zero = p.literal(0.0, d)
        return _fn(p, t, name, f"{t} a, {t} b", f"""
{t} mod = {fmod}(a, b);
if (b == {zero}) return mod;
if (mod == {zero}) return {copysign}({zero}, b);
return ((b < {zero}) != (mod < {zero})) ? mod + b : mod;""",
                   "np.remainder on floats: the result takes the sign of b")
    if D.is_unsigned(d):
        return _fn(p, t, name, f"{t} a, {t} b", "return b == 0 ? 0 : a % b;", "x % 0 -> 0 like NumPy")
    return _fn(p, t, name, f"{t} a, {t} b", f"""
if (b == 0 || b == -1) return 0;
{t} r = a % b;
return (r != 0 && ((r < 0) != (b < 0))) ? ({t})(r + b) : r;""",
               "Python modulo: the result takes the sign of b; x % 0 -> 0; MIN % -1 never traps")


def _pow(p, name, kind, d):
    t, w = p.t(d), p.wide_unsigned(d)
    neg = "if (b < 0) return 0;\n" if D.is_signed(d) else ""
    return _fn(p, t, name, f"{t} a, {t} b", f"""
{neg}{w} r = 1, x = ({w})a, e = ({w})b;
while (e != 0) {{
    if (e & 1) r *= x;
    x *= x;
    e >>= 1;
}}
return ({t})r;""", "integer power by repeated squaring in unsigned arithmetic (wraps like NumPy)")


def _shift(p, name, kind, d):
    t, w, bits = p.t(d), p.wide_unsigned(d), D.bits(d)
    if kind == "lshift":
        body = f"return ({w})b >= {bits}u ? ({t})0 : ({t})(({w})a << b);"
    elif D.is_signed(d):
        body = f"if (({w})b >= {bits}u) return a < 0 ? ({t})-1 : ({t})0;\nreturn ({t})(a >> b);"
    else:
        body = f"return ({w})b >= {bits}u ? ({t})0 : ({t})(a >> b);"
    return _fn(p, t, name, f"{t} a, {t} b", body,
               "NumPy shifts: a count >= the bit width (or negative) shifts everything out")


def _cast_float_int(p, name, src, dst):
    """Float -> integer as NumPy does it on x86-64 (a C cast there, so what SSE's truncating
    conversions give; codegen/expr.py Cast): int32 and int64 truncate, and NaN, inf and
    out-of-range values give MIN (the "integer indefinite"); int8/int16/uint8/uint16 go
    through int32 and uint32 through int64, then wrap; uint64 converts [2^63, 2^64) exactly,
    gives 0 from 2^64 up (and +inf), and otherwise goes through int64. C leaves all of that
    undefined, so every case is spelled out."""
    t, f = p.t(dst), p.t(src)
    lit = "float64" if src == "float64" else "float32"
    if dst in ("int32", "int64"):
        lo, hi = p.literal(-2.0 ** (D.bits(dst) - 1), lit), p.literal(2.0 ** (D.bits(dst) - 1), lit)
        body = f"return (x >= {lo} && x < {hi}) ? ({t})x : {p.literal(D.int_limits(dst)[0], dst)};"
        why = "float -> int truncates; NaN/inf/out-of-range give MIN (as x86 does) instead of UB"
    elif dst == "uint64":
        top, wrap = p.literal(2.0 ** 63, lit), p.literal(2.0 ** 64, lit)
        body = (f"if (x >= {top}) return x < {wrap} ? ({t})x : ({t})0;\n"
                f"return ({t}){p.need(f'qc_cast_{src}_int64')}(x);")
        why = "float -> uint64 as x86-64: [2^63, 2^64) exact, beyond (and inf) 0, else via int64"
    else:
        via = "int64" if dst == "uint32" else "int32"
        body = f"return ({t}){p.need(f'qc_cast_{src}_{via}')}(x);"
        why = f"float -> {dst}: through {via} (NaN/out-of-range: its MIN), then wraps, as NumPy on x86-64"
    return _fn(p, t, name, f"{f} x", body, why)


def _round_f64_f16(p):
    u, fl = p.t("uint32"), p.t("float32")
    bits = p.bitcast("uint32", "f")
    back = p.bitcast("float32", "b")
    return _fn(p, fl, "qc_round_f64_f16", f"{p.t('float64')} d", f"""
{fl} f = ({fl})d;
{u} b = {bits};
if ((double)f != d && d == d && (b & 1u) == 0u) b = (fabs((double)f) > fabs(d)) ? b - 1u : b + 1u;
return {p.round_f16(back)};""",
               "float64 -> float16 without double rounding: round to float32 with round-to-odd\n"
               "// (step an inexact even result towards d), then to half with ties-to-even")
