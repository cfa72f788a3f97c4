"""Exact weak Python ints at launch (values.Exact): a sub-expression made only of captured
Python ints/bools and constants (`t * 4 // 8`, `-t - 1`) is evaluated here with Python's own
integers on every run, never in the kernel, so it can't wrap (DESIGN.md section 4: NumPy 2
gives Python the whole sub-expression). Where it meets a NumPy-typed operand the kernel gets a
parameter derived from it (the translator names it ("exact", role, tree, ...)):

- ("exact", "value", tree, dtype): the value as `dtype`; an integer out of its range raises
  CapturedValueOverflowError (NumPy 2 raises OverflowError for `np.int32(1) + 2**40`), a float
  goes through Python's float (float64) first, as NumPy converts a Python int.
- ("exact", "clamp", tree, dtype), ("exact", "inrange", tree, dtype),
  ("exact", "force", tree, dtype, op): an integer comparison `x op value`, which NumPy 2
  evaluates exactly whatever the value: the kernel computes `(x op clamp) and inrange or force`,
  i.e. the comparison when the value fits `dtype` and the constant answer when it does not.
"""
from __future__ import annotations

import numpy as np

from querycompute._codegen import dtypes
from ..errors import CapturedValueOverflowError, QueryError
from .promotion import PY_BINARY
from .datetimes import ticks
from .translate_ops import SYMBOL

UNARY = {"neg": lambda x: -x, "pos": lambda x: +x, "invert": lambda x: ~x, "abs": abs}
_LIMITS = {d: dtypes.int_limits(d) for d in dtypes.ALL if dtypes.is_int(d)}
# Beyond this magnitude no 64-bit comparison or cast can matter; refuse to build huge ints.
_HUGE_BITS = 256


def is_derived(name) -> bool:
    return type(name) is tuple and len(name) > 0 and name[0] == "exact"


def text(tree: tuple) -> str:
    """The sub-expression as Python source (for messages)."""
    kind = tree[0]
    if kind == "cap":
        return tree[1]
    if kind == "const":
        return repr(tree[1])
    if kind == "un":
        return f"{SYMBOL[tree[1]].split()[-1].rstrip('()')}({text(tree[2])})" if tree[1] == "abs" \
            else f"{SYMBOL[tree[1]].split()[-1]}{text(tree[2])}"
    op, a, b = tree[1], text(tree[2]), text(tree[3])
    if op in ("min", "max"):
        return f"{op}({a}, {b})"
    return f"({a} {SYMBOL[op]} {b})"


def evaluate(tree: tuple, env: dict, where: str):
    """The exact Python value of `tree` with the captures' current values in env."""
    kind = tree[0]
    if kind == "cap":
        return env[tree[1]]
    if kind == "const":
        return tree[1]
    if kind == "un":
        return UNARY[tree[1]](evaluate(tree[2], env, where))
    op = tree[1]
    a, b = evaluate(tree[2], env, where), evaluate(tree[3], env, where)
    if (op == "pow" and abs(a) > 1 and b * a.bit_length() > _HUGE_BITS) or \
            (op == "lshift" and a and b > _HUGE_BITS):
        raise CapturedValueOverflowError(
            f"{where}: {text(tree)} with {_values(tree, env)} is larger than 2**{_HUGE_BITS}: it "
            f"fits no NumPy type (NumPy 2 raises OverflowError); use smaller captured values")
    try:
        out = PY_BINARY[op](a, b)
    except (ZeroDivisionError, ValueError) as e:
        raise QueryError(f"{where}: {text(tree)} with {_values(tree, env)} fails in Python: {e} "
                         f"(Python evaluates it before NumPy sees it)") from None
    if isinstance(out, float):
        raise QueryError(f"{where}: {text(tree)} with {_values(tree, env)} is a float in Python "
                         f"(a negative integer power); the query was compiled for an int: "
                         f"capture a float instead")
    return out


def _values(tree: tuple, env: dict) -> str:
    names = []
    stack = [tree]
    while stack:
        t = stack.pop()
        if t[0] == "cap":
            if t[1] not in names:
                names.append(t[1])
        elif t[0] != "const":
            stack.extend(t[2:])
    return ", ".join(f"{n} = {env[n]!r}" for n in sorted(names))


def origin(name) -> str:
    """What a kernel parameter carries, for explain(): a capture's name, or the derived
    value's sub-expression and role."""
    if not is_derived(name):
        return name if isinstance(name, str) else repr(name)
    role, tree = name[1], name[2]
    if role == "anyfits":
        return f"any of {', '.join(name[4])} fits {name[3]}"
    if role in ("value", "member"):
        return text(tree)
    return f"{role}({text(tree)}, {name[3]})"


def derived_value(name: tuple, dtype: str, env: dict, where: str, lambda_text: str):
    """The value of a derived parameter ("exact", role, tree, ...) as a NumPy scalar."""
    role, tree = name[1], name[2]
    v = evaluate(tree, env, where)
    if role == "time":                  # a captured date/duration in the unit it meets
        return ticks(v, name[3], where)
    if role in ("member", "anyfits"):
        lo, hi = _LIMITS[name[3]]
        if role == "member" and lo <= v <= hi:
            return np.dtype(dtype).type(v)
        fit = [env[k] for k in name[4] if lo <= env[k] <= hi]
        if role == "anyfits":
            return np.bool_(bool(fit))
        return np.dtype(dtype).type(fit[0] if fit else 0)
    if role == "value":
        if dtypes.is_int(dtype):
            lo, hi = dtypes.int_limits(dtype)
            if not lo <= v <= hi:
                raise CapturedValueOverflowError(
                    f"{where}: {text(tree)} = {v} (with {_values(tree, env)}) is out of bounds "
                    f"for {dtype}, the type it meets in `{lambda_text}`; NumPy 2 raises "
                    f"OverflowError here. Use values that keep it in [{lo}, {hi}], or make the "
                    f"element wider first, e.g. np.int64(v)")
            return np.dtype(dtype).type(v)
        if dtypes.is_float(dtype):
            try:
                f = float(v)
            except OverflowError:
                raise CapturedValueOverflowError(
                    f"{where}: {text(tree)} = {v} (with {_values(tree, env)}) is too large to "
                    f"convert to a float (NumPy 2 raises OverflowError); use smaller captured "
                    f"values") from None
            with np.errstate(over="ignore"):
                return np.dtype(dtype).type(f)
        return np.bool_(bool(v))
    lo, hi = dtypes.int_limits(name[3])
    if role == "clamp":
        return np.dtype(dtype).type(min(max(v, lo), hi))
    if role == "inrange":
        return np.bool_(lo <= v <= hi)
    op = name[4]            # role "force": x op v for every x of the type, when v is outside it
    return np.bool_((v > hi and op in ("lt", "le", "ne")) or (v < lo and op in ("gt", "ge", "ne")))
