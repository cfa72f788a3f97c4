"""WGSL (WebGPU Shading Language, run through wgpu): the table of spellings, then the overrides.

WGSL is not C: declarations are `var name: T = ...`, conversions are calls (`f32(x)`), the
ternary is `select(b, a, cond)`, shift counts are u32, `if` bodies always take braces, and
buffers and workgroup arrays are module-scope variables (wgsl_kernel_print.py prints those).
This class keeps CFamily's expression walk and overrides what WGSL spells differently.

Types. WGSL has no 64-bit types and no 8/16-bit integers:
  * int8/int16 live in i32 registers and uint8/uint16 in u32, wrapped back to their width
    after every operation that can leave it (`qc_wrap_<dtype>`), float16 lives in f32,
    rounded to half precision after every operation (`qc_round_f16`), as in the C dialects;
  * in buffers, bool, int8, uint8, int16, uint16 and float16 are packed into u32 words (the
    host's bytes as they are) and read / written a byte or half at a time; writes go through
    atomicAnd / atomicOr on the word, so two invocations writing neighbouring elements of one
    word never lose each other's write (a compaction scatters to arbitrary positions);
  * int64 / uint64 appear in kernel IR only as indexes and counts (the pass check below makes
    sure of it): they are i32 / u32 here, which holds any n a storage binding can (< 2^31).
    NumPy's 64-bit sums of bool / narrow integers (int64, uint64; float64 for their means)
    are kept exactly in two u32 words (CAPS.int64 False: ops/reduce/two_words.py). An element
    value of a 64-bit type (float64 data, int64 columns, qc.range) is refused by
    `check_pass` with the type named.
Element semantics are NumPy's (helpers in wgsl_helpers.py): wrap-around integers, Python
signed // and %, NaN-propagating min/max, NumPy's float -> int conversions, NumPy shifts.
NaN tests read the bits (never `x != x`, which a driver may fold away), and float32 `+ - * /`
results pass through `qc_exact` so that no driver rewrites two of them together (lavapipe did:
wgsl_kernel_print's docstring).
"""
from __future__ import annotations

import math

from .. import dtypes as D
from .. import expr as E
from ..capabilities import DialectCaps
from ..errors import UnsupportedType
from ..program import narrow_value
from . import c_syntax as S
from . import wgsl_helpers
from .c_family import CFamily
from .c_syntax import Code
from .wgsl_kernel_print import WgslKernelPrinter, ident, select

_BINOPS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/",
           "bitand": "&", "bitor": "|", "bitxor": "^", "and": "&&", "or": "||"}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_NO_64 = "WGSL has no 64-bit types: use float32 / int32 values (e.g. .select(np.float32))"
_RANGE_64 = ("qc.range produces int64 indexes (its start and step are int64) and WGSL has no 64-bit "
             "types: run it on another backend (.on('cpu')), or query an int32 array instead, "
             "qc.query(np.arange(start, stop, step, dtype=np.int32))")


class Wgsl(WgslKernelPrinter, CFamily):
    name = "webgpu"
    # no 64-bit types (int64 / uint64 are index types here, printed i32 / u32: check_pass);
    # no forward-progress guarantee between workgroups; subgroups optional in WebGPU (not
    # used: shared-memory trees everywhere); atomics only on atomic<T> buffers
    CAPS = DialectCaps("WGSL", int64=False, float64=False)
    TYPES = {"bool": "bool", "int8": "i32", "int16": "i32", "int32": "i32", "int64": "i32",
             "uint8": "u32", "uint16": "u32", "uint32": "u32", "uint64": "u32",
             "float16": "f32", "float32": "f32"}
    PACKED = {"bool": 8, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "float16": 16}  # bits in a u32 word
    UNSUPPORTED = {"float64": _NO_64}
    INT_SUFFIX = {"i32": "i", "u32": "u"}
    SCALAR_TYPES = {"bool": "u32", "float16": "f32"}     # scalar arguments (launch.SCALAR_HOST_TYPE)
    BARRIER = "workgroupBarrier()"
    SHUFFLE_DOWN = ""        # subgroups are optional in WebGPU: shared-memory trees everywhere
    FOLD_RUNS_APART = True   # lavapipe (CI) runs WGSL on the CPU, like pocl
    # a reduction's stage 2 binds every partial and result: split by aggregate into kernels of at
    # most 16 (stage 1 binds the partials alone; lavapipe allows 32 storage buffers a kernel)
    FINALIZE_BUFFERS = 16
    OPTIONS: tuple[str, ...] = ()
    OPTIONS_WHY = ""
    MATH = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
            "arccosh": "acosh", "arctanh": "atanh", "rint": "round", "fabs": "abs"}
    HELPER_MATH = ("expm1", "log1p", "hypot", "atan2", "copysign", "log10", "pow", "tanh", "fmod", "exp2", "cbrt",
                   "sin", "cos", "tan", "exp", "log",   # wgsl_helpers defines them,
                   "sinh", "cosh", "log2", "arcsinh", "arccosh", "arctanh", "arctan", "arcsin", "arccos")  # and wgsl_math_helpers

    # ---- types and the pass check ----------------------------------------------------------
    def storage(self, dtype: str) -> str:
        self.check(dtype)
        return "u32" if dtype in self.PACKED else self.TYPES[dtype]

    def check_pass(self, p) -> None:
        """Refuse a pass whose element values need a 64-bit type (inputs, parameters other
        than a compaction window's, locals, outputs, accumulators): in the kernels a 64-bit
        type can then only be an index or a count, which i32 holds."""
        prog = p.program
        window = set(p.window_params or ())
        if any(s.origin == "range" and D.bits(s.dtype) == 64 for s in prog.params):
            raise UnsupportedType("int64", self.name, _RANGE_64)
        where = [(s.dtype, f"input {s.name!r}") for s in prog.inputs]
        where += [(s.dtype, f"captured value {s.name!r}") for k, s in enumerate(prog.params) if k not in window]
        exprs = [s.expr if hasattr(s, "expr") else s.cond for s in prog.body] + list(prog.outputs)
        aggs = getattr(p.terminal, "aggs", ())
        for a in aggs:
            narrow = narrow_value(a)
            if narrow is not None:          # NumPy's int64 / uint64 / float64 sum of narrow values:
                exprs.append(narrow)        # two uint32 words (ops/reduce/two_words.py)
                continue
            exprs += list(a.values) + ([a.combine] if a.combine is not None else [])
            if a.op in ("sum", "min", "max", "fold"):
                src = a.values[0].dtype if a.values else a.dtype
                where.append((a.dtype, f"the {a.op} (NumPy accumulates {src} in {a.dtype})"))
        for e in exprs:
            where += [(n.dtype, "a value the lambdas compute") for n in E.walk(e) if not isinstance(n, E.Index)]
        for dtype, what in where:
            if D.bits(dtype) == 64:
                raise UnsupportedType(dtype, self.name, f"{what} is {dtype}; {_NO_64}")

    # ---- helpers ---------------------------------------------------------------------------
    def need(self, name: str) -> str:
        if name not in self.helpers:
            self.helpers[name] = wgsl_helpers.define(self, name)
        return name

    def wrap(self, x: Code, dtype: str) -> Code:
        """A value of a narrow integer type brought back into its range."""
        if dtype in ("int8", "int16", "uint8", "uint16"):
            return S.call(self.need(f"qc_wrap_{dtype}"), x)
        return x

    # ---- literals --------------------------------------------------------------------------
    def float_literal(self, v: float, dtype: str) -> Code:
        if v != v or v in (float("inf"), float("-inf")):
            # not a constant expression: WGSL refuses a non-finite constant at compile time
            bits = {"nan": 0x7FC00000, "inf": 0x7F800000, "-inf": 0xFF800000}[repr(v)]
            return S.call(self.need("qc_f32_bits"), Code(f"0x{bits:08X}u"))
        text = repr(float(v))
        if "e" not in text and "." not in text:
            text += ".0"
        return S.literal(text + "f")

    def int_literal(self, v: int, dtype: str) -> Code:
        reg = self.TYPES[dtype]
        if reg == "u32":
            return S.literal(f"{min(v, 2 ** 32 - 1)}u")
        v = max(min(v, 2 ** 31 - 1), -2 ** 31)    # int64 indexes: INT64_MAX ("none") -> INT32_MAX
        if v == -2 ** 31:
            return Code("i32(-2147483648)")      # 2147483648i would not parse
        return S.literal(f"{v}i")

    # ---- element expressions ---------------------------------------------------------------
    def code(self, e: E.Expr) -> Code:
        if isinstance(e, E.Compare):
            a, b = self.code(e.a), self.code(e.b)
            if e.a.dtype == "bool" and e.op not in ("eq", "ne"):
                a, b = S.call("u32", a), S.call("u32", b)
            if e.op == "ne" and D.is_float(e.a.dtype):
                # naga emits `!=` as an ordered compare (false when either side is NaN);
                # IEEE and NumPy say NaN != x is true: the negated ordered `==` is.
                return S.unary("!", S.binary(a, "==", b))
            return S.binary(a, _CMP[e.op], b)
        if isinstance(e, E.Where):
            return select(self.code(e.b), self.code(e.a), self.code(e.cond))
        if isinstance(e, E.Var):
            return Code(ident(e.name))
        return super().code(e)

    def unary(self, e: E.Unary) -> Code:
        x, d = self.code(e.x), e.dtype
        if e.op == "not" or (e.op == "invert" and d == "bool"):
            return S.unary("!", x)
        if e.op == "invert":
            return self.wrap(S.unary("~", x), d)
        if e.op == "neg":
            if D.is_float(d):
                return S.unary("-", x)
            if D.is_unsigned(d):
                return self.wrap(S.binary(Code("0u"), "-", x), d)
            return self.wrap(S.unary("-", x), d)       # i32 wraps: -MIN == MIN
        if e.op == "abs":
            if d == "bool" or D.is_unsigned(d):
                return x
            if D.is_float(d):
                # the sign bit cleared: drivers drop abs() of values they prove >= 0 (lavapipe:
                # abs(sqrt(-0.0)) is -0.0 there), an integer mask they keep
                return Code(f"bitcast<f32>(bitcast<u32>({x.text}) & 0x7FFFFFFFu)")
            return self.wrap(S.call("abs", x), d)      # abs(MIN) == MIN in WGSL as in NumPy
        raise ValueError(f"unknown unary op {e.op!r}")

    def binary(self, e: E.Binary) -> Code:
        a, b, d, o = self.code(e.a), self.code(e.b), e.dtype, e.op
        if d == "bool":
            if o in ("min", "and", "bitand", "mul"):
                return S.binary(a, "&&" if o == "and" else "&", b)
            if o in ("max", "or", "bitor", "add"):
                return S.binary(a, "||" if o == "or" else "|", b)
            if o in ("bitxor", "sub"):
                return S.binary(a, "!=", b)
        if o in ("floordiv", "mod", "lshift", "rshift") or (o == "pow" and not D.is_float(d)) \
                or (o in ("min", "max") and D.is_float(d)):
            out = S.call(self.need(f"qc_{o}_{d}"), a, b)
            # a float16 // or % is computed in f32 (NumPy's half loops do too): round it
            # to half precision like every other float16 operation, before it is stored
            return self.f16(out, d) if D.is_float(d) else self.wrap(out, d)
        if o in ("min", "max"):
            return S.call(o, a, b)                     # exact on integers
        if o in ("pow", "hypot", "atan2", "copysign", "fmod"):
            return self.f16(S.call(self.math(o, d), a, b), d)
        if D.is_float(d) and o in ("mul", "add", "sub", "truediv"):
            folded = self._unfoldable(e, a, b, d)
            if folded is not None:
                return folded
        if D.is_float(d) and o == "sub" and a.text == b.text:
            # x - x: drivers that treat WGSL arithmetic as inexact fold it to 0 (lavapipe's NIR
            # does, depending on the shader around it), but IEEE gives NaN for NaN and inf
            bad = f"{self.need('qc_isnan')}({a.text}) || {self.need('qc_isinf')}({a.text})"
            nan = f"{self.need('qc_f32_bits')}(0x7FC00000u)"
            return self.f16(Code(f"select(0.0f, {nan}, {bad})"), d)
        if D.is_float(d):
            # float32 results through qc_exact, which no compiler sees through: lavapipe's NIR
            # treats WGSL arithmetic as inexact and rewrote (a - b) + b to a, b + 3 + 3 to b + 6
            # (float16 results are rounded by a helper already)
            out = S.binary(a, _BINOPS[o], b)
            return self.f16(S.call(self.need("qc_exact"), out) if d == "float32" else out, d)
        return self.wrap(S.binary(a, _BINOPS[o], b), d)   # i32 / u32 arithmetic wraps in WGSL

    def _unfoldable(self, e: E.Binary, a: Code, b: Code, d: str):
        """x * 0, 0 * x, x + 0, 0 + x and x - (-0) spelled so that a driver treating WGSL float
        arithmetic as inexact (lavapipe's NIR folds x * 0 to 0 and x + 0 to x) still gives
        IEEE's answer: x * ±0 is NaN for NaN and inf, else a zero with the sign of the product;
        x + 0 is x except that -0 + 0 is +0; 0 - x is -x except that 0 - 0 is +0 (lavapipe
        gave -0); x / ±0 (lavapipe folds x / 0.0 to 0) is ±inf, and 0 / x (folded to 0 too) a
        zero with the quotient's sign, both NaN for NaN and 0. None when no operand is a zero
        constant."""
        def zero(node):
            return isinstance(node, E.Const) and float(node.value) == 0.0

        def negative(node):
            return math.copysign(1.0, float(node.value)) < 0

        def nan():
            return f"{self.need('qc_f32_bits')}(0x7FC00000u)"
        if e.op == "truediv":
            if zero(e.b):
                return self.f16(S.call(self.need("qc_div_zero"), a, b), d)
            if not zero(e.a):
                return None
            sign = f"(bitcast<u32>({b.text}) & 0x80000000u)" + (" ^ 0x80000000u" if negative(e.a) else "")
            bad = f"{self.need('qc_isnan')}({b.text}) || {b.text} == 0.0f"
            return self.f16(Code(f"select(bitcast<f32>({sign}), {nan()}, {bad})"), d)
        if e.op == "sub" and zero(e.a) and not zero(e.b):
            if negative(e.a):
                return None                            # -0 - x is -x for every x
            return self.f16(Code(f"select(-({b.text}), 0.0f, bitcast<u32>({b.text}) == 0u)"), d)
        x, z = (a, e.b) if zero(e.b) else (b, e.a) if zero(e.a) and e.op != "sub" else (None, None)
        if x is None:
            return None
        neg_zero = negative(z)
        if e.op == "mul":
            bad = f"{self.need('qc_isnan')}({x.text}) || {self.need('qc_isinf')}({x.text})"
            sign = f"(bitcast<u32>({x.text}) & 0x80000000u)" + (" ^ 0x80000000u" if neg_zero else "")
            code = f"select(bitcast<f32>({sign}), {nan()}, {bad})"
        elif (e.op == "add") != neg_zero:              # x + 0 or x - (-0): -0 becomes +0
            code = f"select({x.text}, 0.0f, bitcast<u32>({x.text}) == 0x80000000u)"
        else:                                          # x - 0 and x + (-0) are x itself
            return None
        return self.f16(Code(code), d)

    def math(self, fn: str, dtype: str) -> str:
        if fn in self.HELPER_MATH:
            return self.need(f"qc_{fn}")
        return self.MATH.get(fn, fn)

    def call(self, e: E.Call) -> Code:
        x = self.code(e.x)
        if e.fn in E.FLOAT_PREDICATES:
            return S.call(self.need(f"qc_{e.fn}"), x)
        return self.f16(S.call(self.math(e.fn, e.dtype), x), e.dtype)

    def cast(self, x: Code, src: str, dst: str) -> Code:
        if src == dst:
            return x
        if dst == "bool":                          # NaN is truthy: see code() on `!=`
            if D.is_float(src):
                return S.unary("!", S.binary(x, "==", self.lit(0, src)))
            return S.binary(x, "!=", self.lit(0, src))
        if src == "bool":
            return Code(self.round_f16(f"f32({x.text})")) if dst == "float16" else S.call(self.t(dst), x)
        if D.is_float(src) and D.is_int(dst):
            return S.call(self.need(f"qc_cast_{dst}"), x)
        if dst == "float16":
            return Code(self.round_f16(S.call("f32", x).text if src != "float32" else x.text))
        if D.is_float(dst):
            return S.call("f32", x) if src != "float16" else x
        # integer -> integer: i32 <-> u32 keep the bits in WGSL; narrow targets wrap
        reg_src, reg_dst = self.t(src), self.t(dst)
        moved = x if reg_src == reg_dst else S.call(reg_dst, x)
        if D.bits(dst) < 32 and (D.bits(src) > D.bits(dst) or D.is_signed(src) != D.is_signed(dst)):
            return self.wrap(moved, dst)
        return moved
