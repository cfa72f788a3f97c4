"""Typed scalar expression IR: what one element's computation is made of.

The frontend produces these fully typed: every node carries its result dtype, and operands
of arithmetic nodes have *already been cast* to the node's dtype (NumPy/NEP 50 promotion is
resolved before codegen), so a printer never promotes anything itself. The semantics each
printer must reproduce exactly (NumPy 2, element by element) are documented per op below.

Nodes are frozen dataclasses: hashable and comparable, so a program can be part of a cache
signature, and equal sub-expressions compare equal.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

# --- operators --------------------------------------------------------------------------
# Unary ops (operand dtype == result dtype unless noted):
#   neg     arithmetic negation; integers wrap (-INT_MIN == INT_MIN), unsigned wrap modulo 2^n
#   invert  bitwise not on integers
#   not     logical not; operand and result are bool
#   abs     |x|; integers wrap (abs(INT_MIN) == INT_MIN); floats clear the sign bit (NaN kept)
UNARY_OPS = ("neg", "invert", "not", "abs")

# Binary ops (both operands and result share one dtype unless noted):
#   add sub mul     integers wrap (two's complement); floats IEEE, no FMA contraction
#   truediv         floats only (the frontend casts ints to float first)
#   floordiv        floats: floor(a / b) as np.floor_divide (Python signs; x//0 -> +-inf/nan);
#                   integers: rounds toward -inf; b == 0 -> 0; INT_MIN // -1 -> INT_MIN (wraps)
#   mod             floats: np.remainder (sign of b; x % 0 -> nan);
#                   integers: result has the sign of b; b == 0 -> 0
#   pow             floats: C's pow() with C99's special values ((-0.0) ** 0.5 == +0.0); a math
#                   function (ulps may differ by libm). The frontend writes constant exponents
#                   2, -1, 0.5 as x * x, 1 / x, sqrt, so those are exact everywhere.
#                   integers: repeated squaring with wrap-around; b < 0 -> 0 (NumPy raises)
#   bitand bitor bitxor   integers and bool
#   lshift rshift   integers; NumPy semantics: shift >= bit width gives 0 (lshift, and
#                   rshift of non-negative), -1 for rshift of a negative signed value;
#                   negative shift counts behave like too-large ones
#   min max         np.minimum / np.maximum: a NaN operand gives NaN (the first if both are);
#                   on equal operands (0.0 and -0.0) float32/64 return b, float16 returns a
#   and or          logical, operands and result bool (no short circuit needed: pure exprs)
#   hypot atan2 copysign  floats only (float16 computed in float32)
#   fmod            floats only: C's fmod (np.fmod), exact: the sign of a, x fmod 0 -> nan
#                   (the frontend builds integer np.fmod from `mod`)
BINARY_OPS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow",
              "bitand", "bitor", "bitxor", "lshift", "rshift", "min", "max",
              "and", "or", "hypot", "atan2", "copysign", "fmod")

# Comparisons: operands share one dtype, result is bool. Any comparison with NaN is false,
# except `ne`, which is true.
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")

# Elementwise functions of one float argument (operand dtype == result dtype, a float type;
# float16 is computed in float32 and rounded). `rint` rounds half to even. exp2 and cbrt are
# math functions like exp (the dialect's ulp), exact at powers of two / cubes of them.
FLOAT_FUNCS = ("sqrt", "exp", "log", "log2", "log10", "sin", "cos", "tan",
               "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh",
               "arcsinh", "arccosh", "arctanh", "expm1", "log1p",
               "floor", "ceil", "trunc", "rint", "exp2", "cbrt")
# Predicates on a float argument, result bool.
FLOAT_PREDICATES = ("isnan", "isinf", "isfinite")


@dataclass(frozen=True)
class Expr:
    """Base class. Every node has a `dtype` (a name from querycompute._codegen.dtypes.ALL)."""


@dataclass(frozen=True, eq=False)
class Const(Expr):
    """A literal. `value` is a Python bool/int/float already representable in `dtype`
    (floats may be nan/inf; printers must spell those).

    Equality and hash go by the float's repr, not by ==: 0.0 == -0.0 in Python, so by value
    `max(v, 0.0)` and `max(v, -0.0)` would be one program and share a compiled kernel (and a
    printer's memo), while they differ in the sign of a zero result; repr also makes a NaN
    constant equal to itself."""
    value: Union[bool, int, float]
    dtype: str

    def _key(self):
        return self.dtype, type(self.value), repr(self.value)

    def __eq__(self, other):
        return type(other) is Const and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())


@dataclass(frozen=True)
class Param(Expr):
    """A scalar kernel parameter (a captured closure/global value). Its value is passed at
    launch, never pasted into source, so a new value never recompiles."""
    name: str
    dtype: str


@dataclass(frozen=True)
class Lookup(Expr):
    """Entry `index` of the table parameter `table` (a ParamSpec with table=True: one value
    per distinct string of a string column, computed per call on the host): how a string
    function that is no code range (endswith, a substring `in`, len) reads its value per row,
    `index` being the row's code."""
    table: str
    index: Expr
    dtype: str


@dataclass(frozen=True)
class Load(Expr):
    """The current element of input buffer number `input` (index into ElementProgram.inputs)."""
    input: int
    dtype: str


@dataclass(frozen=True)
class Index(Expr):
    """The current element's position in the source sequence (int64), before any filter."""
    dtype: str = "int64"


@dataclass(frozen=True)
class Var(Expr):
    """A local defined by a `Let` earlier in the program body (or an accumulator name in a
    fold's combine expression)."""
    name: str
    dtype: str


@dataclass(frozen=True)
class Unary(Expr):
    op: str
    x: Expr
    dtype: str


@dataclass(frozen=True)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: str


@dataclass(frozen=True)
class Compare(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: str = "bool"


@dataclass(frozen=True)
class Call(Expr):
    """A FLOAT_FUNCS / FLOAT_PREDICATES function of one argument."""
    fn: str
    x: Expr
    dtype: str


@dataclass(frozen=True)
class Where(Expr):
    """`a if cond else b`; cond is bool, a and b already have `dtype`."""
    cond: Expr
    a: Expr
    b: Expr
    dtype: str


@dataclass(frozen=True)
class Cast(Expr):
    """Conversion with NumPy's `astype` semantics for in-range values: float -> int
    truncates toward zero, int -> narrower int wraps, x -> bool is x != 0, bool -> number is
    0/1, float64 -> float32/16 rounds to nearest even. Float -> int of NaN/inf/out-of-range
    values follows NumPy's scalar conversion on x86-64 (np.uint32(v) of a NumPy float):
    int64 and int32 give MIN (x86's "integer indefinite"); uint32 wraps the int64 result
    and int8/int16/uint8/uint16 the int32 one (so -2.5 -> uint32 is 2**32 - 2 and NaN -> 0);
    uint64 converts [2**63, 2**64) exactly, gives 0 from 2**64 up (and for +inf), and wraps
    the int64 result below 2**63."""
    x: Expr
    dtype: str


def children(e: Expr) -> tuple[Expr, ...]:
    """Direct sub-expressions, for generic walks."""
    if isinstance(e, Unary):
        return (e.x,)
    if isinstance(e, (Binary, Compare)):
        return (e.a, e.b)
    if isinstance(e, (Call, Cast)):
        return (e.x,)
    if isinstance(e, Where):
        return (e.cond, e.a, e.b)
    if isinstance(e, Lookup):
        return (e.index,)
    return ()


def walk(e: Expr):
    """Pre-order iteration over an expression tree."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))
