"""Prints expression trees (codegen.expr) as numba-compilable Python statements.

Each node becomes one assignment `tK = ...` (equal sub-trees share one name), so operands
are always plain names and a spelling may mention an operand twice. Values are held as:
bool -> numba bool; integers -> numpy scalars of the node's type; float32/float64 -> numpy
scalars; float16 -> float32 holding a float16 value (rounded after every operation, as
NumPy's half loops do). numba widens small integers to int64 in arithmetic, so every integer
result is narrowed back with the type's constructor (`np.int8(...)`), which wraps like NumPy.
"""
from __future__ import annotations

import math

from .. import dtypes as D
from ..ir import expr as E
from .numba_py_helpers import helper_name

_PY_BINOPS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/",
              "bitand": "&", "bitor": "|", "bitxor": "^", "and": "&", "or": "|"}
_PY_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_FLOAT_BINARY_FUNCS = {"hypot": "np.hypot", "atan2": "np.arctan2", "copysign": "np.copysign"}


def register_type(dtype: str) -> str:
    """The numpy constructor of the scalar type a value of `dtype` is held in."""
    if dtype == "bool":
        return "bool"
    return "np.float32" if dtype == "float16" else f"np.{dtype}"


def const_text(value, dtype: str) -> str:
    if dtype == "bool":
        return "True" if value else "False"
    if D.is_float(dtype):
        v = float(value)
        if math.isnan(v):
            lit = "np.nan"
        elif math.isinf(v):
            lit = "np.inf" if v > 0 else "-np.inf"
        else:
            lit = repr(v)
        return f"{register_type(dtype)}({lit})"
    return f"{register_type(dtype)}({int(value)})"


class ExprPrinter:
    """Prints the expressions of one function body. `names` maps Load/Param/Var/Index to
    the Python names that hold them; `helpers` collects (kind, float_type) pairs the module
    must define."""

    def __init__(self, load_name, param_name, index_name: str, helpers: set):
        self.load_name = load_name          # input number -> expression text
        self.param_name = param_name        # param name -> variable name
        self.index_name = index_name
        self.helpers = helpers
        self.lines: list[str] = []
        self.vars: dict[str, str] = {}      # Let / fold names -> Python local names
        self._memo: dict[E.Expr, str] = {}
        self._temps = 0

    def bind_var(self, name: str, pyname: str) -> None:
        self.vars[name] = pyname

    def define(self, name: str, e: E.Expr) -> None:
        """A Let: local `name` (printed as v_<name>) holds the value of `e`."""
        local = f"v_{name}"
        if e in self._memo:
            self.lines.append(f"{local} = {self._memo[e]}")
        else:
            self.lines.append(f"{local} = {self._spell(e)}")
            self._memo[e] = local
        self.vars[name] = local

    def value(self, e: E.Expr) -> str:
        """Emit statements computing `e` (once) and return the name holding it."""
        if e in self._memo:
            return self._memo[e]
        text = self._spell(e)
        if text.isidentifier() or isinstance(e, E.Const):   # no temporary needed
            self._memo[e] = text
            return text
        name = f"t{self._temps}"
        self._temps += 1
        self.lines.append(f"{name} = {text}")
        self._memo[e] = name
        return name

    def _helper(self, kind: str, float_type: str | None = None) -> str:
        self.helpers.add((kind, float_type))
        return helper_name(kind, float_type)

    def _round(self, dtype: str, text: str) -> str:
        """Wrap a computed value so it has exactly `dtype`'s precision / range."""
        if dtype == "float16":
            return f"{self._helper('f16')}(np.float32({text}))"
        if dtype == "bool":
            return text
        return f"{register_type(dtype)}({text})"

    # ---- one node --------------------------------------------------------------------------
    def _spell(self, e: E.Expr) -> str:
        if isinstance(e, E.Const):
            return const_text(e.value, e.dtype)
        if isinstance(e, E.Param):
            return self.param_name(e.name)
        if isinstance(e, E.Load):
            return self.load_name(e.input)
        if isinstance(e, E.Lookup):
            return f"{self.param_name(e.table)}[{self.value(e.index)}]"
        if isinstance(e, E.Index):
            return f"np.int64({self.index_name})"
        if isinstance(e, E.Var):
            if e.name not in self.vars:
                raise ValueError(f"Var {e.name!r} is used before a Let defines it")
            return self.vars[e.name]
        if isinstance(e, E.Unary):
            return self._unary(e.op, self.value(e.x), e.dtype)
        if isinstance(e, E.Binary):
            return self._binary(e.op, self.value(e.a), self.value(e.b), e.dtype)
        if isinstance(e, E.Compare):
            if e.op not in _PY_CMP:
                raise ValueError(f"unknown comparison {e.op!r}; expected one of {E.COMPARE_OPS}")
            return f"{self.value(e.a)} {_PY_CMP[e.op]} {self.value(e.b)}"
        if isinstance(e, E.Call):
            return self._call(e.fn, self.value(e.x), e.dtype)
        if isinstance(e, E.Where):
            c, a, b = self.value(e.cond), self.value(e.a), self.value(e.b)
            return f"{a} if {c} else {b}"
        if isinstance(e, E.Cast):
            return self._cast(self.value(e.x), e.x.dtype, e.dtype)
        raise TypeError(f"unknown expression node {type(e).__name__}")

    def _unary(self, op: str, x: str, d: str) -> str:
        if op == "not":
            return f"not {x}"
        if op == "neg":
            if D.is_float(d):
                return f"-{x}"
            # integers: 0 - x wraps (also for unsigned and INT_MIN); int64 in uint64, see _wrapping
            return self._wrapping("-", self._zero(d), x, d)
        if op == "invert":
            return f"not {x}" if d == "bool" else self._round(d, f"~{x}")
        if op == "abs":
            return f"abs({x})" if D.is_float(d) else self._round(d, f"abs({x})")
        raise ValueError(f"unknown unary op {op!r}; expected one of {E.UNARY_OPS}")

    def _binary(self, op: str, a: str, b: str, d: str) -> str:
        if op in ("min", "max"):
            cmp = "<" if op == "min" else ">"
            if D.is_float(d):
                # np.minimum/np.maximum: a NaN operand wins (a first); on a tie (0.0 vs
                # -0.0) NumPy's float32/64 loops return b but its half loop returns a
                if d == "float16":
                    cmp += "="
                return f"{a} if ({a} {cmp} {b} or {a} != {a}) else {b}"
            return f"{a} if {a} {cmp} {b} else {b}"
        if op in ("lshift", "rshift"):
            return self._shift(op, a, b, d)
        if op == "fmod":                   # float16: in float32 (exact), like NumPy's half loop
            t = "float32" if d == "float16" else d
            return self._round(d, f"{self._helper('fmod', t)}({a}, {b})")
        if op in _FLOAT_BINARY_FUNCS:
            return self._round(d, f"{_FLOAT_BINARY_FUNCS[op]}({a}, {b})")
        if d == "bool" and op in ("bitand", "bitor", "bitxor", "and", "or"):
            return f"{a} {_PY_BINOPS[op]} {b}"
        if op == "floordiv":
            if D.is_float(d):
                return self._float_helper("ffloordiv", a, b, d)
            kind = "sfloordiv" if D.is_signed(d) else "ufloordiv"
            return self._round(d, f"{self._helper(kind)}({a}, {b})")
        if op == "mod":
            if D.is_float(d):
                return self._float_helper("fremainder", a, b, d)
            kind = "smod" if D.is_signed(d) else "umod"
            return self._round(d, f"{self._helper(kind)}({a}, {b})")
        if op == "pow":
            if D.is_float(d):
                return self._round(d, f"{a} ** {b}")
            return self._round(d, f"{self._helper('ipow')}({a}, {b})")
        if op in _PY_BINOPS:
            if op == "truediv" and not D.is_float(d):
                raise ValueError(f"truediv needs float operands, got {d}; cast them first")
            if op in ("add", "sub", "mul") and D.is_int(d):
                return self._wrapping(_PY_BINOPS[op], a, b, d)
            return self._round(d, f"{a} {_PY_BINOPS[op]} {b}")
        raise ValueError(f"unknown binary op {op!r}; expected one of {E.BINARY_OPS}")

    def _zero(self, d: str) -> str:
        return self.value(E.Const(0, d))

    def _wrapping(self, sym: str, a: str, b: str, d: str) -> str:
        """Integer + - * that wraps like NumPy. numba marks signed adds, subtracts and
        multiplies `nsw` (LLVM may assume they never overflow, and then folds `v + 1 > v` to
        True), so int64 arithmetic is done in uint64, whose operations wrap; narrower types
        are computed in int64 by numba, where they cannot overflow, and narrowed back."""
        if d == "int64":
            return f"np.int64(np.uint64({a}) {sym} np.uint64({b}))"
        return self._round(d, f"{a} {sym} {b}")

    def _float_helper(self, kind: str, a: str, b: str, d: str) -> str:
        """Float // or % (both call the fmod helper of their float type)."""
        if d == "float16":                 # NumPy computes half divmod in float32, then rounds
            self._helper("fmod", "float32")
            return self._round(d, f"{self._helper(kind, 'float32')}({a}, {b})")
        self._helper("fmod", d)
        return f"{self._helper(kind, d)}({a}, {b})"

    def _shift(self, op: str, a: str, b: str, d: str) -> str:
        """NumPy shifts: a count outside [0, width) gives 0, or -1 for >> of a negative."""
        w = D.bits(d)
        in_range = f"{b} < {w}" if D.is_unsigned(d) else f"0 <= {b} < {w}"
        T = register_type(d)
        if op == "lshift":
            return f"{T}({a} << {b}) if {in_range} else {T}(0)"
        overflow = f"({T}(-1) if {a} < 0 else {T}(0))" if D.is_signed(d) else f"{T}(0)"
        return f"{T}({a} >> {b}) if {in_range} else {overflow}"

    def _call(self, fn: str, x: str, d: str) -> str:
        if fn in E.FLOAT_PREDICATES:
            return f"np.{fn}({x})"
        if fn == "log2" and d == "float64":
            # numba declares np.log2's libm call once per module with the first type it
            # meets, so np.log2 on float32 and float64 in one function fails to compile;
            # math.log2 is the same libm function for a float64
            return self._round(d, f"math.log2({x})")
        if fn in ("exp2", "cbrt"):
            # the same one-type declaration (llvm.exp2 / cbrt): always in float64, then rounded
            # (a math function: within its ulp of NumPy's float32 loop, usually closer)
            return self._round(d, f"np.{fn}(np.float64({x}))")
        if fn in E.FLOAT_FUNCS:
            return self._round(d, f"np.{fn}({x})")
        raise ValueError(f"unknown function {fn!r}; expected one of "
                         f"{E.FLOAT_FUNCS + E.FLOAT_PREDICATES}")

    def _cast(self, x: str, src: str, dst: str) -> str:
        if src == dst:
            return x
        if dst == "bool":
            return f"{x} != 0"
        if dst == "float16":
            # round once from the exact value (float64 holds every int that doesn't overflow)
            return f"{self._helper('f16')}(np.float64({x}))"
        if src == "float16" and dst == "float32":
            return x                      # already held in float32, exactly
        if D.is_float(src) and D.is_int(dst):
            return self._float_to_int(x, dst)
        return f"{register_type(dst)}({x})"

    def _float_to_int(self, x: str, dst: str) -> str:
        """NumPy's float -> int on x86-64 (codegen/expr.py Cast): through int64 (uint32),
        int32 (narrower types) or the uint64 rule, then wrapped to `dst`."""
        if dst == "uint64":
            self._helper("f2i64")
            return f"{self._helper('f2u64')}({x})"
        via = "f2i64" if dst in ("int64", "uint32") else "f2i32"
        wide = f"{self._helper(via)}({x})"
        return wide if dst in ("int64", "int32") else f"{register_type(dst)}({wide})"
