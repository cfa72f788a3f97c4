"""The printer shared by every GPU dialect: the C family (CUDA C, OpenCL C, Metal) and WGSL.

A dialect subclass fills the *table* (class attributes: type names, thread ids, barrier,
qualifiers, literal suffixes, math names, the language's rules: IMPLICIT_CONVERSIONS,
INT_WRAPS, ...) and overrides a few methods (kernel signature, storage conversions, prelude;
WGSL also the element semantics where it or its drivers differ from NumPy). Everything
semantic is here, once: element expressions are printed so that they compute exactly what
NumPy 2 computes (codegen/expr.py), using helper functions emitted into the prelude only when
a kernel needs them (c_helpers.py writes them; wgsl_helpers.py WGSL's). Kernel IR statements,
index arithmetic and whole kernels are printed by the KernelPrinter mixin (kernel_print.py);
operator precedence lives in c_syntax.py (the parentheses it adds for clarity around bitwise
and shift operators are ones WGSL requires).
One printer instance prints one KernelSet (it remembers which helpers were used).
"""
from __future__ import annotations

from .. import dtypes as D
from ..ir import expr as E
from ..ir import kernel_ir as K
from ..capabilities import DialectCaps
from ..launch import BLOCK
from ..errors import UnsupportedType
from ..ir.program import narrow_value
from . import c_helpers
from . import c_syntax as S
from .c_syntax import Code
from .kernel_print import KernelPrinter
from .c_vector import VectorLoads

_ARCH_NAMES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan",
               "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh"}
_C_BINOPS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/",
             "bitand": "&", "bitor": "|", "bitxor": "^", "and": "&&", "or": "||"}
NO_64 = "{language} has no 64-bit types: use float32 / int32 values (e.g. .select(np.float32))"
_RANGE_64 = ("qc.range produces int64 indexes (its start and step are int64) and {language} has no 64-bit "
             "types: run it on another backend (.on('cpu')), or query an int32 array instead, "
             "qc.query(np.arange(start, stop, step, dtype=np.int32))")
_C_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


class CFamily(KernelPrinter, VectorLoads):
    # What the dialect has (capabilities.py): every dialect declares its own; the ops read
    # these, never the dialect's name.
    CAPS: DialectCaps
    # ---- the table: every dialect overrides these -------------------------------------------
    name = "?"
    TYPES: dict[str, str] = {}          # dtype -> register type (float16 lives in a float)
    STORAGE: dict[str, str] = {}        # dtype -> buffer element type where it differs
    INT_SUFFIX: dict[str, str] = {}     # dtype -> integer literal suffix
    THREAD: dict[str, str] = {}         # KThread.kind -> expression
    BARRIER = ""
    SHARED = ""                         # qualifier of block-shared arrays
    SHUFFLE_DOWN = ""                   # format with {v} {o}; "" = no shuffles (CAPS.shuffles)
    SHUFFLE = ""                        # format with {v} {l}: v of lane l (CUDA's one-pass compaction)
    SHUFFLE_TYPES: tuple[str, ...] = ()  # dtypes the shuffle accepts
    BITCAST: dict[str, str] = {}        # target dtype -> format with {v}: reinterpret bits
    FLOAT_SUFFIX = {"float32": "f", "float16": "f", "float64": ""}
    OPTIONS: tuple[str, ...] = ()
    OPTIONS_WHY = ""                    # what the options are for, said once in the header
    UNSUPPORTED: dict[str, str] = {}    # dtype -> why this dialect can't hold it
    FUNC = "static inline"              # qualifiers of prelude helper functions
    MATH: dict[str, str] = _ARCH_NAMES  # NumPy's math function name -> the language's
    HELPER_MATH: tuple[str, ...] = ()   # math functions the language lacks: prelude helpers
    CAST_HELPER = "qc_cast_{src}_{dst}"  # the helper converting a float to an integer as NumPy
    HELPERS = c_helpers                 # the module whose define(printer, name) writes a helper
    UNROLL = "#pragma unroll"
    # Reductions fold each thread's run of consecutive elements on its own before adding it to
    # the thread's accumulators (ops/reduce/gpu.py): for dialects that often run on CPU devices,
    # where one chain of combines through all of a thread's elements is the bottleneck.
    FOLD_RUNS_APART = False
    # C's signed overflow is undefined: integer arithmetic goes through the unsigned type and
    # back; True where the language's own integer arithmetic wraps (WGSL's i32 / u32)
    INT_WRAPS = False
    # Publishing values between blocks (kernel_ir Fence, AtomicAdd, volatile KLoad / Store):
    # only dialects whose kernels do it spell them ("" = not available).
    FENCE = ""                          # device-wide memory fence
    ATOMIC_ADD = ""                     # format with {buf} {i} {v}: old value of buf[i] += v
                                        # (CAPS.buffer_atomics)
    VOLATILE = ""                       # pointer qualifier of a volatile global access
    # A reduction's finalize kernel binds every partial and result: with a number here, it is
    # split by aggregate into kernels binding at most that many storage buffers (None: one).
    FINALIZE_BUFFERS: int | None = None

    def __init__(self):
        self.helpers: dict[str, str] = {}
        self.used_types: set[str] = set()    # e.g. OpenCL enables fp64 only when a double is used

    # ---- types ------------------------------------------------------------------------------
    def check(self, dtype: str) -> None:
        if dtype in self.UNSUPPORTED:
            raise UnsupportedType(dtype, self.name, self.UNSUPPORTED[dtype])

    def check_pass(self, p) -> None:
        """Refuse a pass whose values the dialect can't hold beyond what `check` says of each
        dtype. Without 64-bit values (CAPS.int64 False: WGSL) int64 / uint64 are printed 32-bit
        as index and count types, so no element value may need a 64-bit type (inputs,
        parameters other than a compaction window's, locals, outputs, accumulators)."""
        if self.CAPS.int64:
            return
        prog, language = p.program, self.CAPS.language
        window = set(p.window_params or ())
        if any(s.origin == "range" and D.bits(s.dtype) == 64 for s in prog.params):
            raise UnsupportedType("int64", self.name, _RANGE_64.format(language=language))
        where = [(s.dtype, f"input {s.name!r}") for s in prog.inputs]
        where += [(s.dtype, f"captured value {s.name!r}") for k, s in enumerate(prog.params) if k not in window]
        exprs = [s.expr if hasattr(s, "expr") else s.cond for s in prog.body] + list(prog.outputs)
        for a in getattr(p.terminal, "aggs", ()):
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
                raise UnsupportedType(dtype, self.name, f"{what} is {dtype}; {NO_64.format(language=language)}")

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
            body = self.HELPERS.define(self, name)    # may `need` other helpers first
            self.helpers[name] = body
        return name

    def round_f16(self, x: str) -> str:
        """A float rounded to the nearest float16 (ties to even), kept as a float."""
        return f"{self.need('qc_round_f16')}({x})"

    # ---- literals ---------------------------------------------------------------------------
    def literal(self, value, dtype: str) -> str:
        """A literal as self-contained text (safe anywhere, e.g. inside helper bodies)."""
        return self.lit(value, dtype).at(S.PRIMARY)

    def lit(self, value, dtype: str) -> Code:
        self.check(dtype)
        if dtype == "bool":
            return Code("true" if value else "false")
        if D.is_float(dtype):
            return self.float_literal(float(value), dtype)
        return self.int_literal(int(value), dtype)

    def float_literal(self, v: float, dtype: str) -> Code:
        if v != v or v in (float("inf"), float("-inf")):
            # no portable NAN/INFINITY spelling for every type: reinterpret the IEEE bits
            if dtype == "float64":
                bits = {"nan": 0x7FF8000000000000, "inf": 0x7FF0000000000000, "-inf": 0xFFF0000000000000}
                return Code(self.bitcast("float64", f"0x{bits[repr(v)]:016X}{self.INT_SUFFIX['uint64']}"))
            bits = {"nan": 0x7FC00000, "inf": 0x7F800000, "-inf": 0xFF800000}
            return Code(self.bitcast("float32", f"0x{bits[repr(v)]:08X}{self.INT_SUFFIX['uint32']}"))
        text = repr(v)
        if "e" not in text and "." not in text:
            text += ".0"
        return S.literal(text + self.FLOAT_SUFFIX[dtype])

    def int_literal(self, v: int, dtype: str) -> Code:
        lo, _ = D.int_limits(dtype)
        suffix = self.INT_SUFFIX.get(dtype, "")
        if v == lo and lo < 0:                     # -MIN is not representable: spell MIN as -MAX - 1
            code = Code(f"{v + 1}{suffix} - 1{suffix}", S.BINARY_PREC["-"], "-")
        else:
            code = S.literal(f"{v}{suffix}")
        # narrow literals carry their type, so ?: and helper calls see the right one
        return code if D.bits(dtype) >= 32 else S.unary(f"({self.TYPES[dtype]})", code)

    # ---- element expressions ----------------------------------------------------------------
    def ex(self, e: E.Expr) -> str:
        """An element expression as text for a statement or argument position."""
        return self.code(e).text

    def code(self, e: E.Expr) -> Code:
        if isinstance(e, E.Const):
            return self.lit(e.value, e.dtype)
        if isinstance(e, E.Var):
            return Code(self.ident(e.name))
        if isinstance(e, E.Unary):
            return self.unary(e)
        if isinstance(e, E.Binary):
            return self.binary(e)
        if isinstance(e, E.Compare):
            return self.compare(e)
        if isinstance(e, E.Call):
            return self.call(e)
        if isinstance(e, E.Where):
            return self.ternary(self.code(e.cond), self.code(e.a), self.code(e.b))
        if isinstance(e, E.Cast):
            return self.cast(self.code(e.x), e.x.dtype, e.dtype)
        raise TypeError(f"{type(e).__name__} must be rewritten to a kernel local before printing")

    def compare(self, e: E.Compare) -> Code:
        return self.cmp(e.op, self.code(e.a), self.code(e.b), e.a.dtype)

    def cmp(self, op: str, a: Code, b: Code, dtype: str) -> Code:
        """`a op b` of two values of `dtype` (op: lt, le, gt, ge, eq, ne)."""
        return S.binary(a, _C_CMP[op], b)

    def wrap(self, x: Code, dtype: str) -> Code:
        """A result of `dtype` brought back into its type: C computes bool and narrow types in
        int, so the result is cast back (WGSL wraps narrow integers with a helper)."""
        return S.unary(f"({self.t(dtype)})", x) if self.narrow(dtype) else x

    def narrow(self, dtype: str) -> bool:
        """C promotes bool and types narrower than int to int in arithmetic: their results
        need a cast back (and their overflow would happen in signed int)."""
        return dtype == "bool" or D.bits(dtype) < 32

    def unary(self, e: E.Unary) -> Code:
        x, d = self.code(e.x), e.dtype
        if e.op == "not" or (e.op == "invert" and d == "bool"):
            return S.unary("!", x)
        if e.op == "invert":
            return self.wrap(S.unary("~", x), d)
        if e.op == "neg":
            if D.is_float(d):
                return S.unary("-", x)
            if self.INT_WRAPS:                  # -MIN == MIN; an unsigned x is 0 - x
                return self.wrap(S.binary(self.lit(0, d), "-", x) if D.is_unsigned(d) else S.unary("-", x), d)
            # negate in unsigned arithmetic, where -MIN wraps instead of being undefined
            return S.unary(f"({self.t(d)})", S.unary("-", S.unary(f"({self.wide_unsigned(d)})", x)))
        if e.op == "abs":
            if D.is_float(d):
                return S.call(self.math("fabs", d), x)
            if D.is_unsigned(d) or d == "bool":
                return x
            if self.INT_WRAPS:                  # abs(MIN) == MIN, as in NumPy
                return self.wrap(S.call("abs", x), d)
            return S.call(self.need("qc_abs_" + d), x)
        raise ValueError(f"unknown unary op {e.op!r}")

    def binary(self, e: E.Binary) -> Code:
        return self.binop(e, self.code(e.a), self.code(e.b))

    def binop(self, e: E.Binary, a: Code, b: Code) -> Code:
        """`e` from its operands, already printed (a dialect spells its own cases first)."""
        d, o = e.dtype, e.op
        if o in ("and", "or"):
            return S.binary(a, _C_BINOPS[o], b)
        if o in ("min", "max", "floordiv", "mod", "lshift", "rshift") or (o == "pow" and not D.is_float(d)):
            return S.call(self.need(f"qc_{o}_{d}"), a, b)
        if o in ("pow", "hypot", "atan2", "copysign", "fmod"):
            return self.f16(S.call(self.math(o, d), a, b), d)
        if D.is_float(d):
            return self.f16(S.binary(a, _C_BINOPS[o], b), d)
        if d == "bool" or o in ("bitand", "bitor", "bitxor"):
            return self.wrap(S.binary(a, _C_BINOPS[o], b), d)
        w = self.wide_unsigned(d)
        if self.INT_WRAPS or self.t(d) == w:    # WGSL's integers; C's unsigned int / 64-bit
            return self.wrap(S.binary(a, _C_BINOPS[o], b), d)
        # signed or narrow: compute in the unsigned type (wraps, never undefined), cast back
        wrapped = S.binary(S.unary(f"({w})", a), _C_BINOPS[o], S.unary(f"({w})", b))
        return S.unary(f"({self.t(d)})", wrapped)

    def f16(self, x: Code, dtype: str) -> Code:
        """float16 results are computed in float and rounded after every operation, which
        gives NumPy's float16 result bit for bit (float holds more than twice the bits)."""
        return Code(self.round_f16(x.text)) if dtype == "float16" else x

    def math(self, fn: str, dtype: str) -> str:
        """Name of a float math function for `dtype` (overridden where names carry a suffix):
        a prelude helper where the language lacks it (HELPER_MATH), else MATH's name."""
        if fn in self.HELPER_MATH:
            return self.need(f"qc_{fn}")
        return self.MATH.get(fn, fn)

    def call(self, e: E.Call) -> Code:
        x = self.code(e.x)
        if e.fn in E.FLOAT_PREDICATES:
            return self.predicate(e.fn, x)
        return self.f16(S.call(self.math(e.fn, e.dtype), x), e.dtype)

    def predicate(self, fn: str, x: Code) -> Code:
        """isnan / isinf / isfinite of x, as a bool."""
        return S.unary("(bool)", S.call(fn, x))     # OpenCL's isnan returns int

    def cast(self, x: Code, src: str, dst: str) -> Code:
        if src == dst:
            return x
        if dst == "bool":
            return self.cmp("ne", x, self.lit(0, src), src)
        if src == "bool":
            return self.explicit(x, src, dst)
        if D.is_float(src) and D.is_int(dst):
            return S.call(self.need(self.CAST_HELPER.format(src=src, dst=dst)), x)
        if dst == "float16":
            if src == "float64":
                return S.call(self.need("qc_round_f64_f16"), x)
            return Code(self.round_f16(self.explicit(x, src, "float32").text))
        moved = self.explicit(x, src, dst)
        if D.bits(dst) < 32 and self.t(dst) in (self.t("int32"), self.t("uint32")) and (
                D.bits(src) > D.bits(dst) or D.is_signed(src) != D.is_signed(dst)):
            return self.wrap(moved, dst)        # a narrow type in a 32-bit register (WGSL)
        return moved

    def explicit(self, x: Code, src: str, dst: str) -> Code:
        """An explicit conversion: C prints every cast kernel IR asks for; a language without
        implicit conversions (WGSL) prints one where the register types differ."""
        if not self.IMPLICIT_CONVERSIONS and self.t(src) == self.t(dst):
            return x
        return self.type_cast(x, dst)

    # ---- kernel signatures, from the dialect's table ------------------------------------------
    # KERNEL_HEAD: what precedes the argument list ({name}, {block}, {min_blocks}: ", m" when
    # the kernel asks the compiler to fit m blocks per multiprocessor, else ""); BUFFER_ARG / SCALAR_ARG:
    # one argument ({const}, {type}, {name}, {i} = its position); SCALAR_ARG_TYPES: scalars
    # passed in another type than they compute in (launch.SCALAR_HOST_TYPE on the host side).
    KERNEL_HEAD = ""
    BUFFER_ARG = "{const}{type}* {name}"
    SCALAR_ARG = "{type} {name}"
    SCALAR_ARG_TYPES: dict[str, str] = {}

    def signature(self, k: K.Kernel) -> str:
        args = [(self.BUFFER_ARG if a.is_buffer else self.SCALAR_ARG).format(
                    const="const " if a.kind == "input" else "", name=a.name, i=i,
                    type=self.storage(a.dtype) if a.is_buffer else self.scalar_type(a.dtype))
                for i, a in enumerate(k.args)] + self.extra_args(k)
        joined = ",\n        ".join(args)
        min_blocks = f", {k.min_blocks}" if k.min_blocks else ""
        head = self.KERNEL_HEAD.format(name=k.name, block=BLOCK, min_blocks=min_blocks)
        return head + f"(\n        {joined})"

    def scalar_type(self, dtype: str) -> str:
        return self.SCALAR_ARG_TYPES.get(dtype) or self.t(dtype)

    def extra_args(self, k: K.Kernel) -> list[str]:
        """Arguments beyond the kernel's own (Metal's thread-coordinate attributes)."""
        return []

    # ---- float16 buffers: HALF_LOAD ({buf}, {i}) / HALF_STORE ({buf}, {i}, {v}) from the
    # table; a {h2f} / {f2h} placeholder names a prelude helper the dialect defines.
    HALF_LOAD = ""
    HALF_STORE = ""

    def load(self, buf, index, dtype):
        if dtype == "float16" and buf not in self._shared:
            return self.HALF_LOAD.format(buf=buf, i=index, **self._half_helpers(self.HALF_LOAD))
        return super().load(buf, index, dtype)

    def store(self, buf, index, value, dtype):
        if dtype == "float16" and buf not in self._shared:
            return self.HALF_STORE.format(buf=buf, i=index, v=value.text,
                                          **self._half_helpers(self.HALF_STORE))
        return super().store(buf, index, value, dtype)

    def _half_helpers(self, fmt: str) -> dict:
        return {k: self.need(f"qc_{k}") for k in ("h2f", "f2h") if "{" + k + "}" in fmt}

    # ---- dialect hooks ----------------------------------------------------------------------

    def prelude(self) -> str:
        """Dialect pragmas/includes first, then the helpers the kernels used."""
        return ""
