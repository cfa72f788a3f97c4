"""The `numpy` backend: the reference every other backend is tested against.

It interprets the fused pass with whole-array NumPy operations, one IR node at a time, so its
semantics are NumPy's by construction: every expression is evaluated over all n elements
(dropped ones too; errors are silenced with errstate), the filters' masks are and-ed, and the
terminal reads the surviving elements. One function per stage op (Pass.stage_op, the kernel
compiler's querycompute/_codegen/ops/) runs the pass, through RUN_STAGE_OP: `run_map`,
`run_compact`, and `run_reduce` (numpy_reduce.py), which runs over windows of the input so a
long range is never materialised. No code is generated.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from querycompute._codegen import expr as E
from querycompute._codegen.program import Filter, Let, Pass

from ..base import Backend, BackendCaps, KernelRun, Prepared, now_ms
from .numpy_reduce import run_reduce

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


class _Eval:
    def __init__(self, inputs, params, names, n, offset: int = 0):
        """Evaluates over elements offset .. offset + n - 1: `inputs` hold those elements
        (a window of a longer input: numpy_reduce.py), E.Index counts from `offset`."""
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


class _NumpyPrepared(Prepared):
    def __init__(self, p: Pass):
        self.p = p
        self.names = tuple(ps.name for ps in p.program.params)

    def _body(self, inputs, params, lo: int, hi: int):
        """(evaluator, survivors' mask or None) of elements lo..hi-1 after the program body."""
        ev = _Eval([a[lo:hi] for a in inputs], params, self.names, hi - lo, lo)
        keep = None
        for st in self.p.program.body:
            if isinstance(st, Let):
                ev.vars[st.name] = ev(st.expr)
            elif isinstance(st, Filter):
                m = ev.full(st.cond)
                keep = m.copy() if keep is None else keep & m
        return ev, keep

    def run_quick(self, inputs: Sequence[Any], params: Sequence[Any], n: int) -> tuple:
        """(raw results, run ms)."""
        t0 = now_ms()
        inputs = [np.asarray(a) for a in inputs]
        with np.errstate(all="ignore"):
            out = RUN_STAGE_OP[self.p.stage_op](self.p, lambda lo, hi: self._body(inputs, params, lo, hi), n)
        return out, now_ms() - t0

    def trace_rows(self, run_ms: float) -> list[KernelRun]:
        return [KernelRun(self.p.name, "numpy", cache="interpreted", run_ms=run_ms)]


# ---- one function per stage op: (pass, evaluate, n) -> raw results (backends/base.py) -------
# `evaluate(lo, hi)` -> (evaluator over elements lo..hi-1 after the program body, survivors'
# mask or None when the pass has no filter).
def run_map(p: Pass, evaluate, n: int) -> tuple:
    """Every element's outputs, in order."""
    ev, _ = evaluate(0, n)
    return tuple(np.array(ev.full(e)) for e in p.program.outputs)


def run_compact(p: Pass, evaluate, n: int) -> tuple:
    """The survivors' outputs, in order: a boolean mask keeps source order. With a ToArray
    window (lo, hi), the survivors of rank lo <= r < hi only."""
    ev, keep = evaluate(0, n)
    window = slice(None)
    if p.terminal.window is not None:
        lo, hi = (int(ev.params[w]) for w in p.terminal.window)
        if lo < 0 or hi < lo:
            raise ValueError(f"{p.name}: compaction window [{lo}, {hi}) needs 0 <= lo <= hi")
        window = slice(lo, hi)
    return tuple(np.array(ev.full(e)[keep][window]) for e in p.program.outputs)


RUN_STAGE_OP = {"map": run_map, "compact": run_compact, "reduce": run_reduce}


class NumpyBackend(Backend):
    name = "numpy"
    dialect = "numpy"
    # the reference interpreter: whole-array NumPy calls, folds in element order
    caps = BackendCaps(device="reference", in_order_fold=True, lookup_tables=True)

    def availability(self):
        return True, "NumPy reference interpreter (always available)"

    def source(self, p: Pass) -> str:
        from ...errors import QueryError
        raise QueryError("the numpy backend interprets the plan with NumPy calls and generates no "
                         "kernel source; ask for backend='cpu', 'cuda', 'opencl', 'webgpu' or 'metal'")

    def launch_shape(self, p: Pass, n: int):
        return [{"name": p.name, "grid": "whole arrays", "block": "-"}]

    def prepare(self, p: Pass) -> Prepared:
        return _NumpyPrepared(p)
