"""NEP 50 result types, decided by NumPy itself so we can never drift from it.

NumPy-typed operands are passed to `ufunc.resolve_dtypes` as dtypes and weak Python scalars
as the Python types `int` / `float` (NumPy's own spelling of "weak"); it answers with the
loop NumPy would run, i.e. the dtype each operand is cast to and the result dtype. A weak bool
promotes exactly like np.bool_, so it is passed as that dtype. Answers are memoised: the set
of (ufunc, operand types) a program meets is tiny.

Weak op weak is plain Python arithmetic (both operands are Python objects), so its result
kind is what Python gives: int + int -> int, int / int -> float, True + True -> int.
"""
from __future__ import annotations

import operator

import numpy as np

from .values import WEAK_DTYPE

KIND_RANK = {"bool": 0, "int": 1, "float": 2}

# Python's operator for each IR binary op, for weak op weak (kinds and constant folding).
PY_BINARY = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
    "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
    "bitand": operator.and_, "bitor": operator.or_, "bitxor": operator.xor,
    "lshift": operator.lshift, "rshift": operator.rshift, "min": min, "max": max,
    "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
    "eq": operator.eq, "ne": operator.ne,
}
# The NumPy ufunc whose loop decides each IR op's types.
UFUNC = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power,
    "bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
    "lshift": np.left_shift, "rshift": np.right_shift, "min": np.minimum, "max": np.maximum,
    "hypot": np.hypot, "atan2": np.arctan2, "copysign": np.copysign,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal,
    "neg": np.negative, "pos": np.positive, "invert": np.invert, "abs": np.absolute,
}
_SAMPLE = {"bool": True, "int": 3, "float": 3.0}

_loops: dict[tuple, tuple[str, ...] | str] = {}


class PromotionError(TypeError):
    """NumPy has no loop for these operand types; the message is NumPy's."""


def _standin(dtype: str, weak):
    if weak == "int":
        return int
    if weak == "float":
        return float
    return np.dtype(dtype)


def ufunc_loop(ufunc: np.ufunc, operands: tuple[tuple[str, object], ...]) -> tuple[str, ...]:
    """Dtype names (inputs..., outputs...) of the loop NumPy runs for `ufunc` on operands
    given as (dtype, weak kind or None)."""
    key = (ufunc.__name__, operands)
    hit = _loops.get(key)
    if hit is None:
        try:
            dts = ufunc.resolve_dtypes(tuple(_standin(d, w) for d, w in operands)
                                       + (None,) * ufunc.nout)
            hit = tuple(d.name for d in dts)
        except (TypeError, ValueError) as e:
            hit = str(e)
        _loops[key] = hit
    if isinstance(hit, str):
        raise PromotionError(hit)
    return hit


def python_kind(op: str, ka: str, kb: str) -> str:
    """Kind of `a op b` for Python scalars of kinds ka, kb ("bool"/"int"/"float")."""
    if op in ("min", "max"):
        return max(ka, kb, key=KIND_RANK.__getitem__)
    try:
        result = PY_BINARY[op](_SAMPLE[ka], _SAMPLE[kb])
    except TypeError as e:
        raise PromotionError(f"Python {ka} {op} {kb}: {e}") from None
    return type(result).__name__


def common_type(a: tuple[str, object], b: tuple[str, object]) -> tuple[str, object]:
    """(dtype, weak) both branches of `x if c else y` are brought to (np.result_type rules)."""
    wa, wb = a[1], b[1]
    if wa and wb:
        kind = max(wa, wb, key=KIND_RANK.__getitem__)
        return WEAK_DTYPE[kind], kind
    standins = [0 if w == "int" else 0.0 if w == "float" else np.dtype(d)
                for d, w in (a, b)]
    return np.result_type(*standins).name, None
