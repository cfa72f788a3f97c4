"""The expression IR evaluated with whole-array NumPy operations: the oracle every kernel's
arithmetic is tested against (the numpy backend interprets passes with it,
backends/reference/numpy_ref.py; the column operations' references in ops/<op>/reference.py
evaluate a scan's or a fold's combine with it).

`Eval(inputs, params, names, n, offset)` evaluates an IR node over elements offset ..
offset + n - 1 (every element, dropped ones too: callers silence errors with errstate), with
NumPy's semantics by construction, plus the few rules NumPy leaves to the platform that the
kernels fix: integer pow, float pow's special cases, float -> int casts as x86 does them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .ir import expr as E

_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.remainder,
    "bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor,
    "lshift": np.left_shift, "rshift": np.right_shift, "min": np.minimum, "max": np.maximum,
    "and": np.logical_and, "or": np.logical_or, "hypot": np.hypot, "atan2": np.arctan2,
    "copysign": np.copysign, "fmod": np.fmod,
}
_COMPARE = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
            "eq": np.equal, "ne": np.not_equal}
_UNARY = {"neg": np.negative, "invert": np.invert, "not": np.logical_not, "abs": np.abs}


def _int_pow(a, b, dtype):
    """Integer power with wrap-around; a negative exponent gives 0 (NumPy would raise)."""
    neg = np.less(b, 0)
    r = np.power(a, np.where(neg, 0, b).astype(dtype, copy=False))
    return np.where(neg, np.zeros((), dtype), r).astype(dtype, copy=False)


def _float_pow(a, b):
    """Float power with C99's special values ((-0.0) ** 0.5 == 0.0, (-inf) ** 0.5 == inf).
    np.power fast-paths an exponent *array* of stride 0 (a captured value) equal to 0.5, 2
    or -1 into sqrt / square / reciprocal, and its sqrt gets those two wrong, so a scalar
    exponent is spread into a real array first. (Constant exponents 2, -1, 0.5 never get
    here: the frontend writes them as x * x, 1 / x and a sqrt.)"""
    if np.ndim(b) == 0 and np.ndim(a) > 0:
        b = np.full(np.shape(a), b)
    return np.power(a, b)


def _float_to_int(x, dtype: str):
    """Float -> integer as NumPy's scalar conversion does it on x86-64 (codegen/expr.py
    Cast), spelled out so the reference gives it on every machine (astype's out-of-range
    results depend on the CPU, and its uint32 loop differs from the scalar one even here):
    int64/int32 truncate with MIN for NaN/inf/out-of-range; uint32 wraps from the int64
    result, int8/int16/uint8/uint16 from the int32 one; uint64 converts [2^63, 2^64)
    exactly, gives 0 from 2^64 up and otherwise wraps from int64."""
    x = np.asarray(x, dtype=np.float64)

    def through(bits):
        ok = (x > -(2.0 ** (bits - 1)) - 1) & (x < 2.0 ** (bits - 1))     # False for NaN
        t = f"int{bits}"
        return np.where(ok, np.where(ok, x, 0).astype(t), np.iinfo(t).min).astype(t)

    if dtype == "uint64":
        big = x >= 2.0 ** 63
        high = np.where(big & (x < 2.0 ** 64), np.where(big, x, 0), 0).astype(np.uint64)
        return np.where(big, high, through(64).astype(np.uint64))
    return through(64 if dtype in ("int64", "uint32") else 32).astype(dtype)


class Eval:
    def __init__(self, inputs, params, names, n, offset: int = 0):
        """Evaluates over elements offset .. offset + n - 1: `inputs` hold those elements
        (a window of a longer input: ops/reduce/reference.py), E.Index counts from `offset`."""
        self.inputs = inputs
        self.params = dict(zip(names, params))
        self.n = n
        self.offset = offset
        self.vars: dict[str, Any] = {}

    def __call__(self, e: E.Expr):
        t = type(e)
        if t is E.Load:
            return self.inputs[e.input]
        if t is E.Var:
            return self.vars[e.name]
        if t is E.Const:
            return np.dtype(e.dtype).type(e.value)
        if t is E.Param:
            return self.params[e.name]
        if t is E.Lookup:
            return self.params[e.table][self(e.index)]
        if t is E.Index:
            return np.arange(self.offset, self.offset + self.n, dtype=np.int64)
        if t is E.Cast:
            x = np.asarray(self(e.x))
            if x.dtype.kind == "f" and np.dtype(e.dtype).kind in "iu":
                return _float_to_int(x, e.dtype)
            return x.astype(e.dtype)
        if t is E.Where:
            return np.where(self(e.cond), self(e.a), self(e.b)).astype(e.dtype, copy=False)
        if t is E.Compare:
            return _COMPARE[e.op](self(e.a), self(e.b))
        if t is E.Call:
            return getattr(np, e.fn)(self(e.x))
        if t is E.Unary:
            return _UNARY[e.op](self(e.x))
        if t is E.Binary:
            a, b = self(e.a), self(e.b)
            if e.op == "pow":
                return _float_pow(a, b) if e.dtype.startswith("float") else _int_pow(a, b, e.dtype)
            return np.asarray(_BINARY[e.op](a, b)).astype(e.dtype, copy=False)
        raise TypeError(f"numpy backend: unknown IR node {e!r}")

    def full(self, e: E.Expr) -> np.ndarray:
        """Evaluate to an array of n elements of e.dtype (broadcasting constants)."""
        return np.broadcast_to(np.asarray(self(e), dtype=e.dtype), (self.n,))
