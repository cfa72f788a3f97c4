"""The printer shared by every C-like dialect (CUDA C, OpenCL C, Metal).

A dialect subclass fills the *table* (class attributes: type names, thread ids, barrier,
qualifiers, literal suffixes, math names) and overrides a few methods (kernel signature,
storage conversions, prelude). Everything semantic is here, once: element expressions are
printed so that they compute exactly what NumPy 2 computes (codegen/expr.py), using helper
functions emitted into the prelude only when a kernel needs them (c_helpers.py writes them).
One printer instance prints one KernelSet (it remembers which helpers were used).
"""
from __future__ import annotations

from .. import dtypes as D
from .. import expr as E
from .. import kernel_ir as K
from ..errors import UnsupportedType
from . import c_helpers

_ARCH_NAMES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan",
               "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh"}
_C_BINOPS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/",
             "bitand": "&", "bitor": "|", "bitxor": "^", "and": "&&", "or": "||"}
_C_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


class CFamily:
    # ---- the table: every dialect overrides these -------------------------------------------
    name = "?"
    TYPES: dict[str, str] = {}          # dtype -> register type (float16 lives in a float)
    STORAGE: dict[str, str] = {}        # dtype -> buffer element type where it differs
    INT_SUFFIX: dict[str, str] = {}     # dtype -> integer literal suffix
    THREAD: dict[str, str] = {}         # KThread.kind -> expression
    BARRIER = ""
    SHARED = ""                         # qualifier of block-shared arrays
    SHUFFLE_DOWN = ""                   # format with {v} {o}; "" = no shuffles
    SHUFFLE_TYPES: tuple[str, ...] = ()  # dtypes the shuffle accepts
    BITCAST: dict[str, str] = {}        # target dtype -> format with {v}: reinterpret bits
    FLOAT_SUFFIX = {"float32": "f", "float16": "f", "float64": ""}
    OPTIONS: tuple[str, ...] = ()
    UNSUPPORTED: dict[str, str] = {}    # dtype -> why this dialect can't hold it
    FUNC = "static inline"              # qualifiers of prelude helper functions
    UNROLL = "#pragma unroll"

    def __init__(self):
        self.helpers: dict[str, str] = {}
        self.used_types: set[str] = set()    # e.g. OpenCL enables fp64 only when a double is used

    # ---- types ------------------------------------------------------------------------------
    def check(self, dtype: str) -> None:
        if dtype in self.UNSUPPORTED:
            raise UnsupportedType(dtype, self.name, self.UNSUPPORTED[dtype])

    def t(self, dtype: str) -> str:
        """Register type of a value of `dtype`."""
        self.check(dtype)
        self.used_types.add(dtype)
        return self.TYPES[dtype]

    def storage(self, dtype: str) -> str:
        self.check(dtype)
        self.used_types.add(dtype)
        return self.STORAGE.get(dtype, self.TYPES[dtype])

    def wide_unsigned(self, dtype: str) -> str:
        """Unsigned type integer arithmetic of `dtype` is done in, so overflow wraps (and
        narrow types never promote into signed int, whose overflow is undefined)."""
        return self.TYPES["uint64" if D.bits(dtype) == 64 else "uint32"]

    def bitcast(self, to: str, value: str) -> str:
        return self.BITCAST[to].format(v=value)

    # ---- helpers (prelude functions) --------------------------------------------------------
    def need(self, name: str) -> str:
        """Ensure helper `name` is in the prelude; return its name for the call site."""
        if name not in self.helpers:
            body = c_helpers.define(self, name)       # may `need` other helpers first
            self.helpers[name] = body
        return name

    def round_f16(self, x: str) -> str:
        """A float rounded to the nearest float16 (ties to even), kept as a float."""
        return f"{self.need('qc_round_f16')}({x})"

    # ---- literals ---------------------------------------------------------------------------
    def literal(self, value, dtype: str) -> str:
        self.check(dtype)
        if dtype == "bool":
            return "true" if value else "false"
        if D.is_float(dtype):
            return self.float_literal(float(value), dtype)
        return self.int_literal(int(value), dtype)

    def float_literal(self, v: float, dtype: str) -> str:
        if v != v or v in (float("inf"), float("-inf")):
            # no portable NAN/INFINITY spelling for every type: reinterpret the IEEE bits
            if dtype == "float64":
                bits = {"nan": 0x7FF8000000000000, "inf": 0x7FF0000000000000, "-inf": 0xFFF0000000000000}
                return self.bitcast("float64", f"0x{bits[repr(v)]:016X}{self.INT_SUFFIX['uint64']}")
            bits = {"nan": 0x7FC00000, "inf": 0x7F800000, "-inf": 0xFF800000}
            return self.bitcast("float32", f"0x{bits[repr(v)]:08X}{self.INT_SUFFIX['uint32']}")
        text = repr(v)
        if "e" not in text and "." not in text:
            text += ".0"
        return text + self.FLOAT_SUFFIX[dtype]

    def int_literal(self, v: int, dtype: str) -> str:
        lo, _ = D.int_limits(dtype)
        suffix = self.INT_SUFFIX.get(dtype, "")
        if v == lo and lo < 0:                     # -MIN is not representable: spell MIN as -MAX - 1
            text = f"({v + 1}{suffix} - 1{suffix})"
        else:
            text = f"{v}{suffix}"
        return text if D.bits(dtype) >= 32 else f"(({self.TYPES[dtype]}){text})"

    # ---- element expressions ----------------------------------------------------------------
    def ex(self, e: E.Expr) -> str:
        if isinstance(e, E.Const):
            return self.literal(e.value, e.dtype)
        if isinstance(e, E.Var):
            return e.name
        if isinstance(e, E.Unary):
            return self.unary(e)
        if isinstance(e, E.Binary):
            return self.binary(e)
        if isinstance(e, E.Compare):
            return f"({self.ex(e.a)} {_C_CMP[e.op]} {self.ex(e.b)})"
        if isinstance(e, E.Call):
            return self.call(e)
        if isinstance(e, E.Where):
            return f"({self.ex(e.cond)} ? {self.ex(e.a)} : {self.ex(e.b)})"
        if isinstance(e, E.Cast):
            return self.cast(self.ex(e.x), e.x.dtype, e.dtype)
        raise TypeError(f"{type(e).__name__} must be rewritten to a kernel local before printing")

    def unary(self, e: E.Unary) -> str:
        x, d = self.ex(e.x), e.dtype
        if e.op == "not":
            return f"(!{x})"
        if e.op == "invert":
            return f"(!{x})" if d == "bool" else f"(({self.t(d)})~{x})"
        if e.op == "neg":
            if D.is_float(d):
                return f"(-{x})"
            w = self.wide_unsigned(d)
            return f"(({self.t(d)})(({w})0 - ({w}){x}))"
        if e.op == "abs":
            if D.is_float(d):
                return f"{self.math('fabs', d)}({x})"
            return x if D.is_unsigned(d) or d == "bool" else f"{self.need('qc_abs_' + d)}({x})"
        raise ValueError(f"unknown unary op {e.op!r}")

    def binary(self, e: E.Binary) -> str:
        a, b, d, o = self.ex(e.a), self.ex(e.b), e.dtype, e.op
        if o in ("and", "or"):
            return f"({a} {_C_BINOPS[o]} {b})"
        if o in ("min", "max", "floordiv", "mod", "lshift", "rshift") or (o == "pow" and not D.is_float(d)):
            return f"{self.need(f'qc_{o}_{d}')}({a}, {b})"
        if o in ("pow", "hypot", "atan2", "copysign"):
            return self.f16(f"{self.math(o, d)}({a}, {b})", d)
        if D.is_float(d):
            return self.f16(f"({a} {_C_BINOPS[o]} {b})", d)
        if d == "bool" or o in ("bitand", "bitor", "bitxor"):
            return f"(({self.t(d)})({a} {_C_BINOPS[o]} {b}))"
        w = self.wide_unsigned(d)
        return f"(({self.t(d)})(({w}){a} {_C_BINOPS[o]} ({w}){b}))"

    def f16(self, x: str, dtype: str) -> str:
        """float16 results are computed in float and rounded after every operation, which
        gives NumPy's float16 result bit for bit (float holds more than twice the bits)."""
        return self.round_f16(x) if dtype == "float16" else x

    def math(self, fn: str, dtype: str) -> str:
        """Name of a float math function for `dtype` (overridden where names carry a suffix)."""
        return _ARCH_NAMES.get(fn, fn)

    def call(self, e: E.Call) -> str:
        x = self.ex(e.x)
        if e.fn in E.FLOAT_PREDICATES:
            return f"((bool){e.fn}({x}))"
        return self.f16(f"{self.math(e.fn, e.dtype)}({x})", e.dtype)

    def cast(self, x: str, src: str, dst: str) -> str:
        if src == dst:
            return x
        if dst == "bool":
            return f"({x} != {self.literal(0, src)})"
        if src == "bool":
            return f"(({self.t(dst)}){x})"
        if D.is_float(src) and D.is_int(dst):
            return f"{self.need(f'qc_cast_{src}_{dst}')}({x})"
        if dst == "float16":
            if src == "float64":
                return f"{self.need('qc_round_f64_f16')}({x})"
            return self.round_f16(f"((float){x})")
        return f"(({self.t(dst)}){x})"

    # ---- kernel expressions -----------------------------------------------------------------
    def kex(self, e) -> str:
        if isinstance(e, K.Elem):
            return self.ex(e.expr)
        if isinstance(e, K.KVar):
            return e.name
        if isinstance(e, K.KConst):
            return self.literal(e.value, e.dtype)
        if isinstance(e, K.KOp):
            return f"({self.kex(e.a)} {e.op} {self.kex(e.b)})"
        if isinstance(e, K.KSelect):
            return f"({self.kex(e.cond)} ? {self.kex(e.a)} : {self.kex(e.b)})"
        if isinstance(e, K.KCast):
            inner = self.THREAD[e.x.kind] if isinstance(e.x, K.KThread) else self.kex(e.x)
            return f"(({self.t(e.dtype)}){inner})"
        if isinstance(e, K.KThread):
            return f"(int){self.THREAD[e.kind]}"
        if isinstance(e, K.KLoad):
            return self.load(e.buffer, self.kex(e.index), e.dtype)
        if isinstance(e, K.KShuffleDown):
            return self.SHUFFLE_DOWN.format(v=self.kex(e.value), o=self.kex(e.offset))
        raise TypeError(f"not a kernel expression: {e!r}")

    def load(self, buf: str, index: str, dtype: str) -> str:
        """Read one element; `dtype` is the element type of the buffer (storage conversions
        for bool and float16 happen here, overridden per dialect for float16)."""
        if dtype == "bool" and buf not in self._shared:
            return f"({buf}[{index}] != 0)"
        return f"{buf}[{index}]"

    def store(self, buf: str, index: str, value: str, dtype: str) -> str:
        if dtype == "bool" and buf not in self._shared:
            return f"{buf}[{index}] = ({self.storage('bool')}){value};"
        return f"{buf}[{index}] = {value};"

    def cond(self, e) -> str:
        """A condition in if/for: the outer parentheses of a comparison are redundant there."""
        text = self.kex(e)
        wrapped = isinstance(e, K.KOp) or (isinstance(e, K.Elem) and isinstance(e.expr, E.Compare))
        return text[1:-1] if wrapped else text

    # ---- statements -------------------------------------------------------------------------
    def stmts(self, body, depth: int) -> list[str]:
        out = []
        for s in body:
            out.extend(self.stmt(s, depth))
        return out

    def stmt(self, s, depth: int) -> list[str]:
        pad = "    " * depth
        if isinstance(s, K.Comment):
            return [f"{pad}// {line}" for line in s.text.splitlines()]
        if isinstance(s, K.Declare):
            return [f"{pad}{self.t(s.var.dtype)} {s.var.name} = {self.kex(s.init)};"]
        if isinstance(s, K.Assign):
            return [f"{pad}{s.var.name} = {self.kex(s.value)};"]
        if isinstance(s, K.Store):
            dtype = self._buffer_dtypes[s.buffer]
            return [pad + self.store(s.buffer, self.kex(s.index), self.kex(s.value), dtype)]
        if isinstance(s, K.Barrier):
            return [f"{pad}{self.BARRIER};"]
        if isinstance(s, K.If):
            lines = [f"{pad}if ({self.cond(s.cond)}) {{", *self.stmts(s.then, depth + 1)]
            if s.orelse:
                lines += [f"{pad}}} else {{", *self.stmts(s.orelse, depth + 1)]
            return lines + [f"{pad}}}"]
        if isinstance(s, K.For):
            v = s.var
            step = self.kex(s.step)
            if isinstance(s.step, K.KOp) and s.step.a == v:     # i = i + s  ->  i += s
                step = f"{v.name} {s.step.op}= {self.kex(s.step.b)}"
            else:
                step = f"{v.name} = {step}"
            head = f"for ({self.t(v.dtype)} {v.name} = {self.kex(s.init)}; {self.cond(s.cond)}; {step}) {{"
            return ([f"{pad}{self.UNROLL}"] if s.unroll and self.UNROLL else []) + \
                [pad + head, *self.stmts(s.body, depth + 1), f"{pad}}}"]
        raise TypeError(f"not a statement: {s!r}")

    # ---- kernels ----------------------------------------------------------------------------
    def kernel(self, k: K.Kernel) -> str:
        self._shared = {a.name for a in k.shared}
        self._buffer_dtypes = {a.name: a.dtype for a in k.args if a.is_buffer}
        self._buffer_dtypes.update({a.name: a.dtype for a in k.shared})
        lines = [f"// {line}" for line in k.doc.splitlines()]
        lines.append(self.signature(k) + " {")
        lines += [f"    {self.SHARED} {self.t(a.dtype)} {a.name}[{a.size}];" for a in k.shared]
        lines += self.stmts(k.body, 1)
        lines.append("}")
        return "\n".join(lines)

    def signature(self, k: K.Kernel) -> str:
        raise NotImplementedError

    def prelude(self) -> str:
        """Dialect pragmas/includes first, then the helpers the kernels used."""
        return ""

    def render(self, kernels: list[K.Kernel], header: str) -> str:
        bodies = [self.kernel(k) for k in kernels]   # first, so `helpers` is complete
        parts = [header.rstrip(), self.prelude().rstrip(), *self.helpers.values(), *bodies]
        return "\n\n".join(p for p in parts if p) + "\n"
