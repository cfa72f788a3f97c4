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
from querycompute._codegen.expr import Binary, Call, Cast, Compare, Const, Unary, Where
from .promotion import PromotionError, ufunc_loop
from .translate_ops import binary, const, describe, fail, float_power, fold_cast, to_dtype, truthy, unary
from .values import Scalar

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
                  "arctanh", "expm1", "log1p", "floor", "ceil", "trunc", "rint")
NP_BINARY = {"hypot": "hypot", "arctan2": "atan2", "copysign": "copysign", "power": "pow",
             "minimum": "min", "maximum": "max", "add": "add", "subtract": "sub",
             "multiply": "mul", "true_divide": "truediv", "floor_divide": "floordiv",
             "remainder": "mod", "bitwise_and": "bitand", "bitwise_or": "bitor",
             "bitwise_xor": "bitxor", "left_shift": "lshift", "right_shift": "rshift"}
NP_UNARY = {"absolute": "abs", "negative": "neg", "positive": "pos", "invert": "invert"}
# Module attributes that are fixed numbers, not captured state: folded as weak constants.
MODULE_CONSTANTS = {"pi", "e", "tau", "inf", "nan", "euler_gamma"}
SUPPORTED = ("builtins abs min max round float int bool pow; math.* and np.* elementwise "
             "functions (sqrt exp log log2 log10 expm1 log1p, sin cos tan sinh cosh tanh and "
             "their inverses, floor ceil trunc fabs hypot atan2/arctan2 pow/power isnan isinf "
             "isfinite copysign; np also rint sign square round absolute minimum maximum and the "
             "arithmetic ufuncs); numpy scalar types as casts (np.float32(v))")


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
    return Scalar(e if e.dtype == "int64" else Cast(e, "int64"), "int")


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
        return Scalar(to_dtype(x, "int64" if kind == "int" else "float64", at), kind)
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
         np.sign: _np_sign, np.square: _np_square, np.round: _np_round, np.around: _np_round}
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
