"""Typed operations on Scalars: operators, casts, truthiness, `x if c else y`.

Every function returns fully typed IR (operands already cast to the node dtype, as
codegen/expr.py requires). Types come from promotion.py (NumPy decides); values of weak
constants are folded with Python, which is what Python would compute for `3 * 2` in a lambda.
`at` is the "file:line:col" of the construct, for error messages.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np

from querycompute._codegen import dtypes
from querycompute._codegen.ir.expr import Binary, Call, Cast, Compare, Const, Expr, Unary, Where
from ..errors import UnsupportedLambdaError
from .promotion import KIND_RANK, PY_BINARY, UFUNC, PromotionError, common_type, python_kind, ufunc_loop
from .values import WEAK_DTYPE, Exact, Scalar
from . import datetimes

COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")
FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}
SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
          "pow": "**", "bitand": "&", "bitor": "|", "bitxor": "^", "lshift": "<<",
          "rshift": ">>", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
          "neg": "unary -", "pos": "unary +", "invert": "~", "abs": "abs()", "min": "min()",
          "max": "max()", "hypot": "hypot()", "atan2": "arctan2()", "copysign": "copysign()"}
# On bools NumPy's add/multiply/maximum/minimum loops are logical or/and; say so in the IR
# rather than leave a printer to guess what `+` on bools means.
BOOL_OP = {"add": "or", "mul": "and", "max": "or", "min": "and"}


def fail(at: str, message: str, construct: str):
    raise UnsupportedLambdaError(message, at, construct)


def describe(s: Scalar) -> str:
    return f"a Python {s.weak}" if s.weak else s.dtype


def const(value, at: str) -> Scalar:
    """A weak Python constant (literal or folded result)."""
    if isinstance(value, bool):
        return Scalar(Const(value, "bool"), "bool")
    if isinstance(value, int):
        for d in ("int64", "uint64"):
            lo, hi = dtypes.int_limits(d)
            if lo <= value <= hi:
                return Scalar(Const(value, d), "int")
        fail(at, f"integer constant {value} does not fit in 64 bits", "constant")
    if isinstance(value, float):
        return Scalar(Const(value, "float64"), "float")
    fail(at, f"constant {value!r} of type {type(value).__name__} is not supported; "
             f"kernels compute with bool, int and float", "constant")


def to_dtype(s: Scalar, dtype: str, at: str) -> Expr:
    if s.time is not None:
        datetimes.refuse(s, f"converting to {dtype}", at)
    return _to_dtype(s, dtype, at)


def _to_dtype(s: Scalar, dtype: str, at: str) -> Expr:
    """s's value as `dtype` (NumPy cast semantics). A weak Python int that does not fit an
    integer dtype is an error, as NumPy 2 raises OverflowError for np.int8(1) + 300. A weak
    sub-expression of captured ints (s.exact) is a parameter computed exactly at launch
    (frontend/exact.py); a bare captured int is its own parameter, cast here and range-checked
    at launch (fusion.param_limits)."""
    if s.exact is not None and s.exact.tree[0] != "cap":
        return s.exact.param(("exact", "value", s.exact.tree, dtype), dtype)
    e = s.expr
    if isinstance(e, Const):
        return fold_cast(e, dtype, at, weak=s.weak is not None)
    return e if e.dtype == dtype else Cast(e, dtype)


def fold_cast(c: Const, dtype: str, at: str, weak: bool) -> Const:
    v = c.value
    if dtypes.is_int(dtype) and not isinstance(v, bool):
        if isinstance(v, float):
            if not math.isfinite(v):
                fail(at, f"cannot convert float {v} to integer {dtype}", "constant")
            v = int(v)      # truncation toward zero, like astype
        lo, hi = dtypes.int_limits(dtype)
        if not lo <= v <= hi:
            if weak or c.dtype in dtypes.FLOATS:
                fail(at, f"Python integer {v} out of bounds for {dtype} (NumPy 2 raises "
                         f"OverflowError); use a constant in range or cast explicitly", "constant")
            v = np.array(v, dtype=c.dtype).astype(dtype).item()   # strong ints wrap
        return Const(v, dtype)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return Const(np.array(v, dtype=c.dtype).astype(dtype).item(), dtype)


def truthy(s: Scalar) -> Expr:
    """bool(x) as NumPy/Python define it: x != 0 (so NaN is true)."""
    if s.time is not None:
        datetimes.refuse(s, "truth testing (if / and / or / not)", "")
    if s.exact is not None and s.exact.tree[0] != "cap":
        return to_dtype(s, "bool", "")
    e = s.expr
    if e.dtype == "bool":
        return e
    if isinstance(e, Const):
        return Const(bool(e.value), "bool")
    return Compare("ne", e, Const(0.0 if dtypes.is_float(e.dtype) else 0, e.dtype))


def logical_not(s: Scalar) -> Scalar:
    t = truthy(s)
    if isinstance(t, Const):
        return Scalar(Const(not t.value, "bool"), "bool")
    return Scalar(Unary("not", t, "bool"), "bool")     # `not` always returns a Python bool


def logical(op: str, values: list[Scalar], at: str) -> Scalar:
    """`and` / `or` of bool values (Python's short-circuit is irrelevant: exprs are pure)."""
    for v in values:
        if v.dtype != "bool":
            fail(at, f"`{op}` needs bool operands, got {describe(v)}; for element-wise logic "
                     f"on numbers compare first (v > 0) or use & | on integers", op)
    acc = values[0]
    for v in values[1:]:
        if isinstance(acc.expr, Const) and isinstance(v.expr, Const):
            value = (acc.expr.value and v.expr.value) if op == "and" else (acc.expr.value or v.expr.value)
            expr = Const(value, "bool")
        else:
            expr = Binary(op, truthy(acc), truthy(v), "bool")
        acc = Scalar(expr, "bool" if acc.weak and v.weak else None)
    return acc


def binary(op: str, a: Scalar, b: Scalar, at: str, numpy_call: bool = False) -> Scalar:
    """a op b. Python scalars on both sides compute as Python would, unless the call is a
    numpy function (np.hypot(1, 2) is a NumPy float64)."""
    if a.time is not None or b.time is not None:
        return datetimes.binary(op, a, b, at)
    if a.weak and b.weak and not numpy_call:
        return _python_binary(op, a, b, at)
    try:
        loop = ufunc_loop(UFUNC[op], ((a.dtype, a.weak), (b.dtype, b.weak)))
    except PromotionError as e:
        fail(at, f"{SYMBOL[op]} is not supported for {describe(a)} and {describe(b)}: {e}", op)
    ta, tb, out = loop
    if op in COMPARE:
        folded = _out_of_range_compare(op, a, b, ta)
        if folded is not None:
            return folded
        exact = _exact_compare(op, a, b, ta, at)
        if exact is not None:
            return exact
        ta, tb = _narrow_compare_with_captured(a, b, ta, tb)
        ea, eb = to_dtype(a, ta, at), to_dtype(b, tb, at)
        if ta != tb:
            return Scalar(_mixed_sign_compare(op, ea, eb))
        return Scalar(Compare(op, ea, eb))
    if not ta == tb == out:
        fail(at, f"{SYMBOL[op]} on {describe(a)} and {describe(b)} has no single-type "
                 f"NumPy loop ({ta}, {tb} -> {out}); cast an operand explicitly", op)
    _check_int_pow(op, b, out, at)
    op = BOOL_OP.get(op, op) if out == "bool" else op
    if op == "pow" and dtypes.is_float(out):
        return Scalar(float_power(to_dtype(a, ta, at), to_dtype(b, tb, at)))
    return Scalar(Binary(op, to_dtype(a, ta, at), to_dtype(b, tb, at), out))


def float_power(x: Expr, y: Expr) -> Expr:
    """x ** y on floats. A constant exponent of 2, -1 or 0.5 is computed as x * x, 1 / x and
    sqrt(x) (pow's special values kept: (-0.0) ** 0.5 == 0.0, (-inf) ** 0.5 == inf), 1 as x
    and 0 as 1: correctly rounded, so every backend gives the same bits, where each libm's
    pow (glibc's too) may be an ulp off and OpenCL's pow may be several. Any other exponent
    is the platform's pow, a math function (DESIGN.md section 4: the dialect's ulp)."""
    d = x.dtype
    if isinstance(y, Const) and not isinstance(y.value, bool):
        v = float(y.value)
        if v == 2.0:
            return Binary("mul", x, x, d)
        if v == -1.0:
            return Binary("truediv", Const(1.0, d), x, d)
        if v == 1.0:
            return x
        if v == 0.0:
            return Const(1.0, d)
        if v == 0.5:
            root = Unary("abs", Call("sqrt", x, d), d)       # sqrt(-0.0) is -0.0; pow's is +0.0
            return Where(Compare("eq", x, Const(float("-inf"), d)), Const(float("inf"), d), root, d)
    return Binary("pow", x, y, d)


def _python_binary(op: str, a: Scalar, b: Scalar, at: str) -> Scalar:
    try:
        kind = python_kind(op, a.weak, b.weak)
    except PromotionError as e:
        fail(at, f"{SYMBOL[op]} is not supported here: {e}", op)
    if isinstance(a.expr, Const) and isinstance(b.expr, Const):
        try:
            value = PY_BINARY[op](a.expr.value, b.expr.value)
        except (ZeroDivisionError, OverflowError, ValueError) as e:
            fail(at, f"constant expression {a.expr.value!r} {SYMBOL[op]} {b.expr.value!r} "
                     f"fails in Python: {e}", op)
        return const(value, at)
    exact = _exact_tree(a, b, ("bin", op), kind)
    a, b = replace(a, exact=None), replace(b, exact=None)   # the IR below is a stand-in then
    if op in COMPARE:
        work = WEAK_DTYPE[max(a.weak, b.weak, key=KIND_RANK.__getitem__)]
        return Scalar(Compare(op, to_dtype(a, work, at), to_dtype(b, work, at)), "bool", exact)
    if op == "pow" and kind == "int" and isinstance(b.expr, Const) and b.expr.value < 0:
        kind = "float"      # Python: 2 ** -1 == 0.5
    work = "float64" if op == "truediv" else WEAK_DTYPE[kind]
    ir_op = BOOL_OP.get(op, op) if work == "bool" else op
    if ir_op == "pow" and dtypes.is_float(work):
        return Scalar(float_power(to_dtype(a, work, at), to_dtype(b, work, at)), kind)
    return Scalar(Binary(ir_op, to_dtype(a, work, at), to_dtype(b, work, at), work), kind, exact)


def _exact_tree(a: Scalar, b, node: tuple, kind: str):
    """The Exact of a weak int/bool result from weak int/bool operands that are captured
    sub-expressions or constants (at least one captured); else None."""
    if kind not in ("int", "bool"):
        return None
    parts, make = [], None
    for s in (a, b) if b is not None else (a,):
        if s.weak not in ("int", "bool"):
            return None
        if s.exact is not None:
            parts.append(s.exact.tree)
            make = s.exact.param
        elif isinstance(s.expr, Const):
            parts.append(("const", s.expr.value))
        else:
            return None
    return None if make is None else Exact(node + tuple(parts), make)


def _exact_compare(op: str, a: Scalar, b: Scalar, loop_dtype: str, at: str):
    """`x op c` with c a captured weak int (sub-expression) and x NumPy-typed, in an integer
    loop: NumPy 2 compares exactly whatever c's value (np.uint32(5) == 2**40 + 5 is False,
    np.int32(0) > -2**31 - 1 is True), so the kernel computes `(x op clamp(c)) and inrange or
    force` from three parameters set at launch (frontend/exact.py): no wrap, no recompile."""
    if not dtypes.is_int(loop_dtype):
        return None
    for c, other, cmp in ((b, a, op), (a, b, FLIP[op])):
        if c.weak == "int" and c.exact is not None and other.weak is None:
            tree, d = c.exact.tree, loop_dtype
            w = c.exact.param(("exact", "clamp", tree, d), d)
            keep = c.exact.param(("exact", "inrange", tree, d), "bool")
            force = c.exact.param(("exact", "force", tree, d, cmp), "bool")
            x = to_dtype(other, d, at)
            return Scalar(Binary("or", Binary("and", Compare(cmp, x, w), keep, "bool"), force, "bool"))
    return None


def _check_int_pow(op: str, b: Scalar, out: str, at: str):
    if (op == "pow" and dtypes.is_int(out) and isinstance(b.expr, Const)
            and not isinstance(b.expr.value, bool) and b.expr.value < 0):
        fail(at, "integers to negative integer powers are not allowed (NumPy raises "
                 "ValueError); use a float base, e.g. float(v) ** -1", "**")


def _out_of_range_compare(op: str, a: Scalar, b: Scalar, loop_dtype: str):
    """NumPy 2 compares an integer with an out-of-range Python int exactly: the answer is
    the same for every element (np.int8(5) < 300 is True)."""
    if not dtypes.is_int(loop_dtype):
        return None
    for c, other, cmp in ((b, a, op), (a, b, FLIP[op])):
        if c.weak == "int" and isinstance(c.expr, Const) and other.weak is None:
            lo, hi = dtypes.int_limits(loop_dtype)
            v = c.expr.value
            if v > hi:      # other < v for every element
                return Scalar(Const(cmp in ("lt", "le", "ne"), "bool"))
            if v < lo:
                return Scalar(Const(cmp in ("gt", "ge", "ne"), "bool"))
    return None


def _narrow_compare_with_captured(a: Scalar, b: Scalar, ta: str, tb: str) -> tuple[str, str]:
    """A weak Python int computed in the kernel (int() of a captured float; captured ints
    themselves are exact, _exact_compare) against an 8- or 16-bit integer: NumPy 2 compares
    exactly (np.uint8(5) > 1000 is False, not an OverflowError), so compare both in int32,
    which holds every narrow value."""
    for c, other in ((a, b), (b, a)):
        if c.weak == "int" and not isinstance(c.expr, Const) and other.weak is None \
                and dtypes.is_int(other.dtype) and dtypes.bits(other.dtype) <= 16:
            return "int32", "int32"
    return ta, tb


def _mixed_sign_compare(op: str, ea: Expr, eb: Expr) -> Expr:
    """int64 vs uint64, which NumPy 2 compares exactly: a negative signed value is below
    every unsigned one, otherwise compare as unsigned."""
    if dtypes.is_unsigned(ea.dtype):
        ea, eb, op = eb, ea, FLIP[op]
    negative = Compare("lt", ea, Const(0, ea.dtype))
    cmp = Compare(op, Cast(ea, eb.dtype), eb)
    if op in ("lt", "le", "ne"):
        return Binary("or", negative, cmp, "bool")
    return Binary("and", Unary("not", negative, "bool"), cmp, "bool")


def unary(op: str, s: Scalar, at: str, numpy_call: bool = False) -> Scalar:
    """-x, +x, ~x, abs(x) ("neg", "pos", "invert", "abs")."""
    if s.time is not None:
        return datetimes.unary(op, s, at)
    if s.weak and not numpy_call:
        return _python_unary(op, s, at)
    try:
        t, out = ufunc_loop(UFUNC[op], ((s.dtype, s.weak),))
    except PromotionError as e:
        fail(at, f"{SYMBOL[op]} is not supported for {describe(s)}: {e}", op)
    x = to_dtype(s, t, at)
    if op == "pos" or (op == "abs" and out == "bool"):
        return Scalar(x)
    if op == "invert" and out == "bool":
        return Scalar(Unary("not", x, "bool"))
    return Scalar(Unary(op, x, out))


def _python_unary(op: str, s: Scalar, at: str) -> Scalar:
    if s.weak == "float" and op == "invert":
        fail(at, "~ is not defined for a Python float; it needs an integer", "~")
    if isinstance(s.expr, Const):
        v = s.expr.value
        return const({"neg": lambda: -v, "pos": lambda: +v, "invert": lambda: ~v,
                      "abs": lambda: abs(v)}[op](), at)
    kind = "int" if s.weak == "bool" else s.weak      # -True == -1: bools become ints
    exact = _exact_tree(s, None, ("un", op), kind)
    x = to_dtype(replace(s, exact=None), WEAK_DTYPE[kind], at)
    return Scalar(x if op == "pos" else Unary(op, x, x.dtype), kind, exact)


def select(cond: Scalar, a: Scalar, b: Scalar, at: str) -> Scalar:
    """`a if cond else b`: both branches promoted together (NumPy's result_type)."""
    c = truthy(cond)
    if isinstance(c, Const):       # Python returns that branch itself, unpromoted
        return a if c.value else b
    if a.time is not None or b.time is not None:
        return datetimes.select(c, a, b, at)
    dtype, weak = common_type((a.dtype, a.weak), (b.dtype, b.weak))
    return Scalar(Where(c, to_dtype(a, dtype, at), to_dtype(b, dtype, at), dtype), weak)
