"""Function calls inside lambdas: builtins, math.*, numpy ufuncs and numpy scalar types.

Callees are recognised by the identity of the object the name resolves to (so `from math
import sqrt` and `import numpy as xp` work), never by spelling. Result types follow what the
call returns in Python: math.* returns Python floats/ints/bools (weak, computed in float64),
np.* returns NumPy scalars typed by NumPy's loop (np.sqrt(int8) -> float16), builtins
abs/min/max act as np.abs/np.minimum/np.maximum, round/int/float/bool give Python scalars.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from querycompute._codegen import dtypes
from querycompute._codegen.ir.expr import Binary, Call, Cast, Compare, Const, Unary, Where
from .promotion import PromotionError, common_type, ufunc_loop
from .translate_ops import binary, const, describe, fail, float_power, fold_cast, to_dtype, truthy, unary
from .values import WEAK_DTYPE, Scalar

# math name -> IR function name (codegen.expr.FLOAT_FUNCS)
MATH_FUNCS = {"sqrt": "sqrt", "exp": "exp", "log": "log", "log2": "log2", "log10": "log10",
              "sin": "sin", "cos": "cos", "tan": "tan", "asin": "arcsin", "acos": "arccos",
              "atan": "arctan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
              "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh",
              "expm1": "expm1", "log1p": "log1p"}
MATH_TO_INT = ("floor", "ceil", "trunc")
MATH_BINARY = {"hypot": "hypot", "atan2": "atan2", "copysign": "copysign", "pow": "pow"}
PREDICATES = ("isnan", "isinf", "isfinite")
NP_FLOAT_FUNCS = ("sqrt", "exp", "log", "log2", "log10", "sin", "cos", "tan", "arcsin",
                  "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
                  "arctanh", "expm1", "log1p", "floor", "ceil", "trunc", "rint", "exp2", "cbrt")
NP_BINARY = {"hypot": "hypot", "arctan2": "atan2", "copysign": "copysign", "power": "pow",
             "minimum": "min", "maximum": "max", "add": "add", "subtract": "sub",
             "multiply": "mul", "true_divide": "truediv", "floor_divide": "floordiv",
             "remainder": "mod", "bitwise_and": "bitand", "bitwise_or": "bitor",
             "bitwise_xor": "bitxor", "left_shift": "lshift", "right_shift": "rshift",
             "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
             "equal": "eq", "not_equal": "ne"}
NP_UNARY = {"absolute": "abs", "negative": "neg", "positive": "pos", "invert": "invert"}
# Module attributes that are fixed numbers, not captured state: folded as weak constants.
MODULE_CONSTANTS = {"pi", "e", "tau", "inf", "nan", "euler_gamma"}
SUPPORTED = ("builtins abs min max round float int bool pow; math.* and np.* elementwise "
             "functions (sqrt exp log log2 log10 expm1 log1p, sin cos tan sinh cosh tanh and "
             "their inverses, floor ceil trunc fabs hypot atan2/arctan2 pow/power isnan isinf "
             "isfinite copysign; np also rint sign square round absolute minimum maximum, exp2 "
             "cbrt fix fmod signbit reciprocal float_power fmax fmin clip where nan_to_num "
             "deg2rad rad2deg radians degrees conj real imag, the arithmetic, comparison and "
             "logical ufuncs); numpy scalar types as casts (np.float32(v)); methods "
             "v.astype(t) v.clip(lo, hi) v.conj() and v.real v.imag")


def _arity(name: str, args: list, n, at: str):
    counts = n if isinstance(n, tuple) else (n,)
    if len(args) not in counts:
        want = " or ".join(str(c) for c in counts)
        fail(at, f"{name}() takes {want} argument(s) here, got {len(args)}", name)


def _float64(s: Scalar, at: str):
    return to_dtype(s, "float64", at)


# --- builtins -----------------------------------------------------------------------------
def _b_abs(args, at):
    _arity("abs", args, 1, at)
    return unary("abs", args[0], at)


def _b_minmax(op):
    def handler(args, at):
        if len(args) < 2:
            fail(at, f"{op}() needs two or more scalar arguments (an iterable is not "
                     f"supported)", op)
        acc = args[0]
        for a in args[1:]:
            acc = binary(op, acc, a, at)
        return acc
    return handler


def _b_round(args, at):
    if len(args) == 2:
        fail(at, "round(x, ndigits) is not supported; use round(x) (half to even, an int) "
                 "or np.rint(x * 10**k) / 10**k", "round")
    _arity("round", args, 1, at)
    x = args[0]
    if x.dtype == "bool" and x.weak is None:
        fail(at, "round() of a numpy bool is not defined (numpy.bool has no __round__); "
                 "use int(v)", "round")
    if isinstance(x.expr, Const):
        return const(round(x.expr.value), at)
    e = x.expr
    if dtypes.is_float(e.dtype):
        e = Call("rint", e, e.dtype)
    return Scalar(e if e.dtype == "int64" else Cast(e, "int64"))   # int64, not weak (guide)


def _b_convert(kind):
    def handler(args, at):
        _arity(kind, args, 1, at)
        x = args[0]
        if kind == "bool":
            return Scalar(truthy(x), "bool")
        if isinstance(x.expr, Const):
            try:
                return const({"int": int, "float": float}[kind](x.expr.value), at)
            except (ValueError, OverflowError) as e:
                fail(at, f"{kind}({x.expr.value!r}) fails in Python: {e}", kind)
        if kind == "int":       # an int64 in every later operation (guide), not a weak int
            return Scalar(to_dtype(x, "int64", at))
        return Scalar(to_dtype(x, "float64", at), kind)
    return handler


# --- math ---------------------------------------------------------------------------------
def _m_func(name):
    def handler(args, at):
        _arity(f"math.{name}", args, 1, at)
        x = args[0]
        if isinstance(x.expr, Const):
            try:
                return const(getattr(math, name)(x.expr.value), at)
            except (ValueError, OverflowError) as e:
                fail(at, f"math.{name}({x.expr.value!r}) fails in Python: {e}", f"math.{name}")
        return Scalar(Call(MATH_FUNCS[name], _float64(x, at), "float64"), "float")
    return handler


def _m_to_int(name):
    def handler(args, at):
        _arity(f"math.{name}", args, 1, at)
        x = args[0]
        if not dtypes.is_float(x.dtype):
            return Scalar(to_dtype(x, "int64", at), "int")
        return Scalar(Cast(Call(name, _float64(x, at), "float64"), "int64"), "int")
    return handler


def _m_binary(name):
    def handler(args, at):
        _arity(f"math.{name}", args, 2, at)
        a, b = (_float64(s, at) for s in args)
        if isinstance(a, Const) and isinstance(b, Const):
            try:
                return const(float(getattr(math, name)(a.value, b.value)), at)
            except (ValueError, OverflowError) as e:
                fail(at, f"math.{name}({a.value!r}, {b.value!r}) fails in Python: {e}",
                     f"math.{name}")
        if name == "pow":
            return Scalar(float_power(a, b), "float")
        return Scalar(Binary(MATH_BINARY[name], a, b, "float64"), "float")
    return handler


def _m_fabs(args, at):
    _arity("math.fabs", args, 1, at)
    return unary("abs", Scalar(_float64(args[0], at), "float"), at)


def _predicate(name, weak):
    def handler(args, at):
        _arity(name, args, 1, at)
        x = args[0]
        if not dtypes.is_float(x.dtype):     # integers are never nan/inf
            return Scalar(Const(name == "isfinite", "bool"), weak)
        if isinstance(x.expr, Const):
            return Scalar(Const(getattr(math, name)(x.expr.value), "bool"), weak)
        return Scalar(Call(name, x.expr, "bool"), weak)
    return handler


def _m_log(args, at):
    if len(args) == 2:
        fail(at, "math.log(x, base) is not supported; write math.log(x) / math.log(base)",
             "math.log")
    return _m_func("log")(args, at)


# --- numpy ----------------------------------------------------------------------------------
def _np_loop(uf, x: Scalar, at: str):
    try:
        return ufunc_loop(uf, ((x.dtype, x.weak),))
    except PromotionError as e:
        fail(at, f"np.{uf.__name__} is not supported for {describe(x)}: {e}", f"np.{uf.__name__}")


def _np_func(uf, name):
    def handler(args, at):
        _arity(f"np.{uf.__name__}", args, 1, at)
        t, out = _np_loop(uf, args[0], at)
        x = to_dtype(args[0], t, at)
        if not dtypes.is_float(out):        # np.floor of an integer keeps it (NumPy 2.4)
            return Scalar(x)
        return Scalar(Unary("abs", x, out) if name == "fabs" else Call(name, x, out))
    return handler


def _np_predicate(uf):
    def handler(args, at):
        _arity(f"np.{uf.__name__}", args, 1, at)
        t, _ = _np_loop(uf, args[0], at)
        return _predicate(uf.__name__, None)([Scalar(to_dtype(args[0], t, at))], at)
    return handler


def _np_binary(op):
    def handler(args, at):
        _arity(op, args, 2, at)
        return binary(op, args[0], args[1], at, numpy_call=True)
    return handler


def _np_unary(op):
    def handler(args, at):
        _arity(op, args, 1, at)
        return unary(op, args[0], at, numpy_call=True)
    return handler


def _np_sign(args, at):
    _arity("np.sign", args, 1, at)
    t, out = _np_loop(np.sign, args[0], at)
    x = to_dtype(args[0], t, at)
    zero, one = (0.0, 1.0) if dtypes.is_float(out) else (0, 1)
    # x > 0 -> 1, x < 0 -> -1, x == 0 -> 0 (also for -0.0), NaN -> NaN as np.sign does
    inner = Where(Compare("eq", x, Const(zero, t)), Const(zero, t), x, t)
    if not dtypes.is_unsigned(t):
        inner = Where(Compare("lt", x, Const(zero, t)), Const(-one, t), inner, t)
    return Scalar(Where(Compare("gt", x, Const(zero, t)), Const(one, t), inner, t))


def _np_square(args, at):
    _arity("np.square", args, 1, at)
    t, _ = _np_loop(np.square, args[0], at)     # bool squares in int8, as NumPy's loop does
    x = Scalar(to_dtype(args[0], t, at))
    return binary("mul", x, x, at, numpy_call=True)


def _np_round(args, at):
    _arity("np.round", args, (1, 2), at)
    if len(args) == 2 and not (isinstance(args[1].expr, Const) and args[1].expr.value == 0):
        fail(at, "np.round(x, decimals) is supported only with decimals=0", "np.round")
    x = args[0]
    if x.dtype == "bool":       # NumPy rounds a bool into float16
        return Scalar(to_dtype(x, "float16", at))
    if x.weak == "int" or dtypes.is_int(x.dtype):
        return Scalar(to_dtype(x, "int64" if x.weak else x.dtype, at))
    e = to_dtype(x, "float64" if x.weak else x.dtype, at)
    return Scalar(Call("rint", e, e.dtype))


def _loop(uf, args: list, at: str) -> tuple:
    """NumPy's loop for `uf` on these operands: (input dtypes..., output dtype)."""
    try:
        return ufunc_loop(uf, tuple((a.dtype, a.weak) for a in args))
    except PromotionError as e:
        fail(at, f"np.{uf.__name__} is not supported for {' and '.join(map(describe, args))}: {e}",
             f"np.{uf.__name__}")


def _np_fmod(args, at):
    """np.fmod: C's remainder, the sign of a. Integers from Python's `mod` (sign of b), moved
    by b when the signs differ; x fmod 0 -> 0 and MIN fmod -1 -> 0 as NumPy gives."""
    _arity("np.fmod", args, 2, at)
    ta, tb, out = _loop(np.fmod, args, at)
    a, b = to_dtype(args[0], ta, at), to_dtype(args[1], tb, at)
    if dtypes.is_float(out):
        return Scalar(Binary("fmod", a, b, out))
    r = Binary("mod", a, b, out)
    if dtypes.is_unsigned(out):
        return Scalar(r)
    zero = Const(0, out)
    moved = Binary("and", Compare("ne", r, zero),
                   Compare("ne", Compare("lt", r, zero), Compare("lt", a, zero)), "bool")
    return Scalar(Where(moved, Binary("sub", r, b, out), r, out))


def _np_signbit(args, at):
    """np.signbit: the sign bit, of -0.0 and NaN too (copysign reads it)."""
    _arity("np.signbit", args, 1, at)
    t, _ = _loop(np.signbit, args, at)
    x = to_dtype(args[0], t, at)
    return Scalar(Compare("lt", Binary("copysign", Const(1.0, t), x, t), Const(0.0, t)))


def _np_reciprocal(args, at):
    """np.reciprocal: 1 / x on floats. On integers NumPy's loop is C's `(T)(1.0 / x)`: 0 for
    |x| > 1, and 1 / 0 = inf converted as codegen.expr.Cast converts it (x86-64: int32 and
    int64 MIN, 0 for the other types). A float32 quotient holds every case but 1 / 0 exactly,
    and its inf converts the same, so only 64-bit integers need float64."""
    _arity("np.reciprocal", args, 1, at)
    t, out = _loop(np.reciprocal, args, at)
    x = to_dtype(args[0], t, at)
    if dtypes.is_float(out):
        return Scalar(Binary("truediv", Const(1.0, t), x, t))
    f = "float64" if dtypes.bits(t) == 64 else "float32"
    return Scalar(Cast(Binary("truediv", Const(1.0, f), Cast(x, f), f), out))


def _np_fix(args, at):
    """np.fix: rounds toward zero (trunc's bits: fix(-0.5) is -0.0); integers and bools kept."""
    _arity("np.fix", args, 1, at)
    t, out = _loop(np.ceil, args, at)
    x = to_dtype(args[0], t, at)
    return Scalar(Call("trunc", x, out) if dtypes.is_float(out) else x)


def _np_float_power(args, at):
    _arity("np.float_power", args, 2, at)
    ta, tb, _ = _loop(np.float_power, args, at)
    return Scalar(float_power(to_dtype(args[0], ta, at), to_dtype(args[1], tb, at)))


def _np_fminmax(uf, op):
    """np.fmax / np.fmin: a NaN operand is ignored (NaN only when both are). On a tie of 0.0
    and -0.0 the result is np.maximum's / np.minimum's (NumPy's own fmax loops differ there)."""
    def handler(args, at):
        _arity(f"np.{uf.__name__}", args, 2, at)
        ta, tb, out = _loop(uf, args, at)
        a, b = Scalar(to_dtype(args[0], ta, at)), Scalar(to_dtype(args[1], tb, at))
        m = binary(op, a, b, at, numpy_call=True)
        if not dtypes.is_float(out):
            return m
        isnan = [Call("isnan", s.expr, "bool") for s in (a, b)]
        return Scalar(Where(isnan[1], a.expr, Where(isnan[0], b.expr, m.expr, out), out))
    return handler


def _angle(uf, numerator, denominator):
    """np.deg2rad / np.rad2deg: x * (numerator / denominator), that factor rounded in the
    loop's float type as NumPy's C constants are; float16 is computed in float32."""
    def handler(args, at):
        _arity(f"np.{uf.__name__}", args, 1, at)
        t, out = _loop(uf, args, at)
        x = to_dtype(args[0], t, at)
        work = "float64" if out == "float64" else "float32"
        f = np.dtype(work).type
        factor = Const(float(f(f(numerator) / f(denominator))), work)
        product = Binary("mul", x if work == t else Cast(x, work), factor, work)
        return Scalar(product if work == out else Cast(product, out))
    return handler


def _np_logical(op):
    """np.logical_and / or / xor / not: the operands' truth (x != 0, so NaN is true)."""
    uf = getattr(np, f"logical_{op}")

    def handler(args, at):
        _arity(f"np.logical_{op}", args, uf.nin, at)
        _loop(uf, args, at)
        t = [truthy(a) for a in args]
        if all(isinstance(e, Const) for e in t):
            return Scalar(Const(bool(uf(*(e.value for e in t))), "bool"))
        if op == "not":
            return Scalar(Unary("not", t[0], "bool"))
        if op == "xor":
            return Scalar(Compare("ne", t[0], t[1]))
        return Scalar(Binary(op, t[0], t[1], "bool"))
    return handler


def _np_where(args, at):
    """np.where(c, a, b): c's truth picks; both branches brought to NumPy's result type (an
    array's, so two Python ints give int64 and the result is not weak)."""
    if len(args) != 3:
        fail(at, f"np.where takes 3 arguments here (np.where(cond, a, b)), got {len(args)}; "
                 f"the one-argument form (indices) is not an element function", "np.where")
    c, a, b = args
    dtype, _ = common_type((a.dtype, a.weak), (b.dtype, b.weak))
    ea, eb = to_dtype(a, dtype, at), to_dtype(b, dtype, at)
    cond = truthy(c)
    if isinstance(cond, Const):
        return Scalar(ea if cond.value else eb)
    return Scalar(Where(cond, ea, eb, dtype))


def clip(args, at):
    """np.clip(x, lo, hi) in the dtype NumPy's clip loop picks: NaN (in x or a bound)
    propagates, and on a tie (0.0 against -0.0) x is kept, as NumPy's scalar clip loop does
    (its vector loop may return the bound there). With one bound None, NumPy computes
    np.minimum / np.maximum, and so does this. A Python int bound outside an integer dtype's
    range clips nothing, as in NumPy 2."""
    _arity("np.clip", args, 3, at)
    x, lo, hi = args
    if lo is not None and hi is not None:
        try:
            t = ufunc_loop(_CLIP, ((x.dtype, x.weak), (lo.dtype, lo.weak), (hi.dtype, hi.weak)))[-1]
        except PromotionError as e:
            fail(at, f"np.clip is not supported for {describe(x)}, {describe(lo)} and "
                     f"{describe(hi)}: {e}", "np.clip")
        x = Scalar(to_dtype(x, t, at))
        lo, hi = (_bound(s, t, keep, at) for s, keep in ((lo, "low"), (hi, "high")))
        if dtypes.is_float(t):
            e = x.expr
            for bound, keep in ((lo, "ge"), (hi, "le")):      # x kept unless beyond the bound
                e = Where(Binary("or", Compare(keep, e, bound.expr), Call("isnan", e, "bool"), "bool"),
                          e, bound.expr, t)
            return Scalar(e)
    for bound, op in ((lo, "max"), (hi, "min")):
        if bound is not None:
            x = binary(op, x, bound, at, numpy_call=True)
    return x


_CLIP = np._core.umath.clip


def _bound(s: Scalar, t: str, side: str, at: str):
    """A clip bound in dtype t; None when a Python int bound lies beyond t's range on its own
    side (it clips nothing)."""
    if dtypes.is_int(t) and s.weak == "int" and isinstance(s.expr, Const):
        lo, hi = dtypes.int_limits(t)
        v = s.expr.value
        if (side == "low" and v < lo) or (side == "high" and v > hi):
            return None
        if not lo <= v <= hi:
            fail(at, f"np.clip bound {v} lies beyond {t}'s range on the other side, so every "
                     f"value would be clipped to it; clip in a wider type (v.astype(np.int64))",
                 "np.clip")
    return Scalar(to_dtype(s, t, at))


def nan_to_num(args, at):
    """np.nan_to_num(x, copy, nan=0.0, posinf=None, neginf=None): NaN -> nan, inf -> posinf
    (default the dtype's largest value), -inf -> neginf (its lowest), each converted to x's
    dtype; other dtypes are returned as they are."""
    _arity("np.nan_to_num", args, 5, at)
    x, copy, nan, posinf, neginf = args
    if copy is not None and not (isinstance(copy.expr, Const) and copy.expr.value):
        fail(at, "np.nan_to_num(v, copy=...) is supported only with copy=True (the default): "
                 "on a NumPy scalar NumPy raises ValueError for copy=False", "np.nan_to_num")
    t = WEAK_DTYPE[x.weak] if x.weak else x.dtype
    e = to_dtype(x, t, at)
    if not dtypes.is_float(t):
        return Scalar(e)
    fi = np.finfo(t)
    nan, posinf, neginf = (to_dtype(s, t, at) if s is not None else Const(d, t) for s, d in
                           ((nan, 0.0), (posinf, float(fi.max)), (neginf, float(fi.min))))
    out = Where(Compare("eq", e, Const(float("-inf"), t)), neginf, e, t)
    out = Where(Compare("eq", e, Const(float("inf"), t)), posinf, out, t)
    return Scalar(Where(Call("isnan", e, "bool"), nan, out, t))


def real_imag(part: str, x: Scalar, at: str) -> Scalar:
    """x.real / x.imag (np.real / np.imag) of a real number: x itself, or a zero of its type.
    Python scalars answer as Python does (True.real is the int 1)."""
    if x.weak:
        kind = "int" if x.weak == "bool" else x.weak
        if part == "imag":
            return const(0 if kind == "int" else 0.0, at)
        return Scalar(to_dtype(x, WEAK_DTYPE[kind], at), kind)
    if part == "imag":
        return Scalar(Const(False if x.dtype == "bool" else 0.0 if dtypes.is_float(x.dtype) else 0, x.dtype))
    return x


def _np_real_imag(part):
    def handler(args, at):
        _arity(f"np.{part}", args, 1, at)
        return real_imag(part, args[0], at)
    return handler


def _np_conj(args, at):
    """np.conj / np.conjugate of a real number: the number, in the dtype NumPy's loop gives."""
    _arity("np.conjugate", args, 1, at)
    t, out = _loop(np.conjugate, args, at)
    return Scalar(to_dtype(args[0], t, at))


def astype(x: Scalar, dtype: str, at: str) -> Scalar:
    """x.astype(dtype), as np.<dtype>(x) converts (NumPy's cast semantics)."""
    if x.weak:
        fail(at, f".astype() is a method of NumPy values, not of {describe(x)}; write "
                 f"np.{dtype}(...) instead", "astype")
    return _scalar_type(np.dtype(dtype).type)([x], at)


# Parameters of the supported functions that take keyword arguments, in order: a keyword
# fills its slot, an omitted argument is None (the function's default). Aliases: NumPy 2.1's
# np.clip(x, min=, max=).
KEYWORDS = {np.clip: ("a", "a_min", "a_max"), np.nan_to_num: ("x", "copy", "nan", "posinf", "neginf")}
KEYWORD_ALIASES = {np.clip: {"min": "a_min", "max": "a_max"}}


def bind(obj, args: list, keywords: dict, at: str) -> list:
    """Positional arguments and keywords of a call of `obj` as one positional list (None for
    an omitted or None argument), or the error naming the keyword that is not supported."""
    name = f"np.{obj.__name__}" if obj in KEYWORDS else getattr(obj, "__name__", "call")
    params = KEYWORDS.get(obj)
    if params is None:
        if keywords:
            fail(at, f"keyword arguments are not supported in calls of {name} inside a lambda",
                 "call")
        return args
    if len(args) > len(params):
        fail(at, f"{name}() takes at most {len(params)} arguments, got {len(args)}", name)
    out = list(args) + [None] * (len(params) - len(args))
    for key, value in keywords.items():
        key = KEYWORD_ALIASES.get(obj, {}).get(key, key)
        if key not in params[1:]:
            fail(at, f"{name}() keyword {key!r} is not supported; supported: "
                     f"{', '.join(params[1:])}", name)
        if out[params.index(key)] is not None:
            fail(at, f"{name}() got {key!r} twice", name)
        out[params.index(key)] = value
    return out


def _scalar_type(t):
    def handler(args, at):
        _arity(t.__name__, args, 1, at)
        dtype = np.dtype(t).name
        if dtype not in dtypes.ALL:
            fail(at, f"np.{t.__name__} is not a kernel element type; supported: "
                     f"{', '.join(dtypes.ALL)}", t.__name__)
        x = args[0]
        if dtype == "bool":
            return Scalar(truthy(x))
        if isinstance(x.expr, Const):
            return Scalar(fold_cast(x.expr, dtype, at, weak=x.weak is not None))
        return Scalar(to_dtype(x, dtype, at))
    return handler


def _table():
    t = {builtins.abs: _b_abs, builtins.min: _b_minmax("min"), builtins.max: _b_minmax("max"),
         builtins.round: _b_round, builtins.pow: _np_binary("pow"),
         builtins.float: _b_convert("float"), builtins.int: _b_convert("int"),
         builtins.bool: _b_convert("bool"), math.fabs: _m_fabs, math.log: _m_log,
         np.sign: _np_sign, np.square: _np_square, np.round: _np_round, np.around: _np_round,
         np.fmod: _np_fmod, np.signbit: _np_signbit, np.reciprocal: _np_reciprocal,
         np.fix: _np_fix, np.float_power: _np_float_power, np.fmax: _np_fminmax(np.fmax, "max"),
         np.fmin: _np_fminmax(np.fmin, "min"), np.where: _np_where, np.clip: clip,
         np.nan_to_num: nan_to_num, np.real: _np_real_imag("real"), np.imag: _np_real_imag("imag"),
         np.conjugate: _np_conj, np.logical_not: _np_logical("not")}
    for n, f, d in (("deg2rad", math.pi, 180.0), ("radians", math.pi, 180.0),
                    ("rad2deg", 180.0, math.pi), ("degrees", 180.0, math.pi)):
        t[getattr(np, n)] = _angle(getattr(np, n), f, d)
    t.update({getattr(np, f"logical_{op}"): _np_logical(op) for op in ("and", "or", "xor")})
    t.update({getattr(math, n): _m_func(n) for n in MATH_FUNCS if n != "log"})
    t.update({getattr(math, n): _m_to_int(n) for n in MATH_TO_INT})
    t.update({getattr(math, n): _m_binary(n) for n in MATH_BINARY})
    t.update({getattr(math, n): _predicate(n, "bool") for n in PREDICATES})
    t.update({getattr(np, n): _np_func(getattr(np, n), n) for n in NP_FLOAT_FUNCS})
    t[np.fabs] = _np_func(np.fabs, "fabs")
    t.update({getattr(np, n): _np_predicate(getattr(np, n)) for n in PREDICATES})
    t.update({getattr(np, n): _np_binary(op) for n, op in NP_BINARY.items()})
    t.update({getattr(np, n): _np_unary(op) for n, op in NP_UNARY.items()})
    return t


CALLS = _table()


def call_handler(obj):
    """The translation of calling `obj`, or None when it is not a supported function."""
    try:
        handler = CALLS.get(obj)
    except TypeError:       # unhashable objects are never supported callees
        return None
    if handler is None and isinstance(obj, type) and issubclass(obj, np.generic):
        handler = CALLS[obj] = _scalar_type(obj)
    return handler
