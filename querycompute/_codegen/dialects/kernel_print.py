"""Printing of kernel IR (codegen/kernel_ir.py) for every GPU dialect (CUDA C, OpenCL C,
Metal, WGSL): index expressions, statements, kernels and the source file. Mixed into CFamily,
whose table (THREAD, BARRIER, SHARED, DECLARE, ...) and element-expression printer (`code`)
it uses; a dialect changes the walk only through that table and the few hooks below
(`ternary`, `type_cast`, `load`, `store`, `signature`, `shared_arrays`, `kernel_locals`,
`begin_module`, `module_scope`).

Index arithmetic is spelled the way a GPU programmer writes it: one cast where a product
must be computed in 64 bits (`(long long)blockIdx.x * blockDim.x + threadIdx.x`), no casts
that C's usual conversions already make, and the thread coordinates a kernel compares or
indexes with declared once at its top as `int` locals (`lid`, `lane`, ...). A language that
converts nothing implicitly (IMPLICIT_CONVERSIONS False: WGSL) gets every conversion between
register types printed instead (`_conv`), and no cast dropped.
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass

from .. import dtypes as D
from ..ir import expr as E
from ..ir import kernel_ir as K
from . import c_syntax as S
from .c_syntax import Code

# KThread.kind -> the int local a kernel declares when it uses that coordinate as a value
THREAD_LOCALS = {"local_id": "lid", "group_id": "group", "lane": "lane", "warp": "warp",
                 "local_size": "block_size", "num_groups": "num_groups", "simd_width": "simd_width"}
_FLOAT_UPDATES = {"add": "+", "sub": "-", "mul": "*"}


def _promotes_exactly(e) -> bool:
    """A cast to a 64-bit index type that C's usual arithmetic conversions would make anyway
    when the other operand is 64-bit: the operand is a 32-bit signed value or a thread
    coordinate (non-negative), so the converted value is the same either way."""
    return (isinstance(e, K.KCast) and D.bits(e.dtype) == 64
            and D.is_signed(e.x.dtype) and D.bits(e.x.dtype) <= 32)


def _is_one(e) -> bool:
    if isinstance(e, K.Elem):
        e = e.expr
    return isinstance(e, (K.KConst, E.Const)) and e.value == 1 and not isinstance(e.value, bool)


def thread_kinds(node, bare_only: bool = False, found: set | None = None) -> set:
    """KThread kinds used in a kernel body; with `bare_only`, those used as int values (not
    only inside a widening cast), which get an int local."""
    found = set() if found is None else found
    if isinstance(node, K.KThread):
        found.add(node.kind)
    elif isinstance(node, (tuple, list)):
        for item in node:
            thread_kinds(item, bare_only, found)
    elif is_dataclass(node) and not isinstance(node, K.Elem) and not (
            bare_only and isinstance(node, K.KCast) and isinstance(node.x, K.KThread)):
        for f in fields(node):
            thread_kinds(getattr(node, f.name), bare_only, found)
    return found


def _unwrap(text: str) -> str:
    """`(a & b)` -> `a & b` when the outer parentheses enclose the whole text."""
    if not (text.startswith("(") and text.endswith(")")):
        return text
    depth = 0
    for pos, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and pos < len(text) - 1:
            return text
    return text[1:-1]


class KernelPrinter:
    # ---- the language's rules the walk reads (the C family's; wgsl.py sets its own) ---------
    # C converts between arithmetic types by itself (assignments, ?: operands, a + b), so only
    # the casts kernel IR asks for are printed, and one C's usual conversions make is dropped;
    # False: every conversion between register types is printed (`_conv`), no cast dropped
    IMPLICIT_CONVERSIONS = True
    DECLARE = "{type} {name} = {value}"                 # a local with its initialiser
    LOCAL_ARRAY = "{type} {name}[{count}]"              # a thread-local array
    BRACELESS_IF = True                                 # `if (c) s;` for one simple statement
    FLOAT_INCREMENT = True                              # `x++` of a float (WGSL: integers only)
    RESERVED: frozenset[str] = frozenset()              # names the language reserves: get a "_"

    def ident(self, name: str) -> str:
        """A kernel IR name as an identifier of the language (a reserved word gets a "_")."""
        return name + "_" if name in self.RESERVED else name

    def ternary(self, cond: Code, a: Code, b: Code) -> Code:
        """`cond ? a : b`."""
        return S.select(cond, a, b)

    def type_cast(self, x: Code, dtype: str) -> Code:
        """`x` converted to the register type of `dtype`."""
        return S.unary(f"({self.t(dtype)})", x)

    # ---- kernel expressions -----------------------------------------------------------------
    def kcode(self, e) -> Code:
        if isinstance(e, K.Elem):
            return self.code(e.expr)
        if isinstance(e, K.KVar):
            return Code(self.ident(e.name))
        if isinstance(e, K.KConst):
            return self.lit(e.value, e.dtype)
        if isinstance(e, K.KOp):
            a, b = self._operands(e.op, e.a, e.b)
            return S.binary(a, e.op, b)
        if isinstance(e, K.KSelect):
            return self.ternary(self.kcode(e.cond), self._conv(e.a, e.dtype), self._conv(e.b, e.dtype))
        if isinstance(e, K.KCast):
            if self.IMPLICIT_CONVERSIONS:        # the cast as written, of a coordinate's builtin
                return self.type_cast(self._raw(e.x), e.dtype)
            return self._conv(e.x, e.dtype)
        if isinstance(e, K.KThread):
            return Code(THREAD_LOCALS[e.kind])
        if isinstance(e, K.KLoad):
            buf = self._volatile(e.buffer, e.dtype) if e.volatile else e.buffer
            return Code(self.load(buf, self.kcode(e.index).text, e.dtype))
        if isinstance(e, K.KLocal):
            return Code(f"{e.array}[{self.kcode(e.index).text}]")
        if isinstance(e, K.KShuffleDown):
            return Code(self._spelling("SHUFFLE_DOWN").format(v=self.kcode(e.value).text,
                                                              o=self.kcode(e.offset).text))
        if isinstance(e, K.KShuffle):
            return Code(self._spelling("SHUFFLE").format(v=self.kcode(e.value).text, l=self.kcode(e.lane).text))
        raise TypeError(f"not a kernel expression: {e!r}")

    def _raw(self, e) -> Code:
        """Like kcode, but a thread coordinate is spelled as the dialect's builtin: index
        math reads as `(long long)blockIdx.x * blockDim.x + threadIdx.x`."""
        return Code(self.THREAD[e.kind]) if isinstance(e, K.KThread) else self.kcode(e)

    def _conv(self, e, dtype: str) -> Code:
        """Kernel expression `e` as a value of register type t(dtype). C converts by itself;
        WGSL converts nothing implicitly (a count read from an i32 buffer into a u32 register,
        a bool into u32): there the conversion is printed where the register types differ."""
        if self.IMPLICIT_CONVERSIONS:
            return self.kcode(e)
        if isinstance(e, K.KConst):
            return self.lit(e.value, dtype)
        code = self.kcode(e)
        src = getattr(e, "dtype", dtype)
        if self.t(src) == self.t(dtype):
            return code
        if dtype == "bool":
            return S.binary(code, "!=", self.lit(0, src))
        return self.type_cast(code, dtype)

    def _operands(self, op: str, a, b) -> tuple[Code, Code]:
        """Operands of `a op b`: a shift count as uint32 (WGSL's rule; C converts it itself),
        and, where the language converts implicitly, a widening cast the other operand makes
        redundant dropped (only for + and *, where every index operand is non-negative)."""
        if op in ("<<", ">>"):
            return self.kcode(a), self._conv(b, "uint32")
        if op in ("+", "*") and self.IMPLICIT_CONVERSIONS:
            if _promotes_exactly(b) and D.bits(a.dtype) == 64:
                return self.kcode(a), self._raw(b.x)
            if _promotes_exactly(a) and D.bits(b.dtype) == 64 and not _promotes_exactly(b):
                return self._raw(a.x), self.kcode(b)
        return self.kcode(a), self.kcode(b)

    def _init(self, var: K.KVar, e) -> str:
        """An initialiser: assigning to a 64-bit local converts like the cast would."""
        if self.IMPLICIT_CONVERSIONS and _promotes_exactly(e) and e.dtype == var.dtype:
            return self._raw(e.x).text
        return self._conv(e, var.dtype).text

    def _declare(self, var: K.KVar, init) -> str:
        return self.DECLARE.format(type=self.t(var.dtype), name=self.ident(var.name),
                                   value=self._init(var, init))

    def _update(self, var: K.KVar, value) -> str:
        """`var = value` as `var++` / `var op= x` when value is `var op x`."""
        name = self.ident(var.name)
        if isinstance(value, K.KOp) and value.a == var and value.op in ("+", "-", "*", ">>", "<<"):
            if value.op == "+" and _is_one(value.b) and (self.FLOAT_INCREMENT or not D.is_float(var.dtype)):
                return f"{name}++"
            return f"{name} {value.op}= {self._operands(value.op, value.a, value.b)[1].text}"
        if isinstance(value, K.Elem) and isinstance(value.expr, E.Binary):
            x = value.expr
            # float32/64 only: float16 rounds after the op, integers wrap through unsigned casts
            if x.op in _FLOAT_UPDATES and x.dtype in ("float32", "float64") and x.a == E.Var(var.name, var.dtype):
                return f"{name} {_FLOAT_UPDATES[x.op]}= {self.ex(x.b)}"
        return f"{name} = {self._conv(value, var.dtype).text}"

    # ---- buffer accesses (dialects override the float16 / packed storage conversions) --------
    def _spelling(self, what: str) -> str:
        """A table entry only some dialects have (FENCE, ATOMIC_ADD, VOLATILE, SHUFFLE_DOWN, SHUFFLE)."""
        text = getattr(self, what, "")
        if not text:
            raise ValueError(f"the {self.name} printer has no {what} spelling (only kernels that "
                             f"publish values between blocks or shuffle need one)")
        return text

    def _volatile(self, buf: str, dtype: str) -> str:
        """`buf` seen through a volatile pointer (the storage conversions still apply)."""
        return f"(({self._spelling('VOLATILE')} {self.storage(dtype)}*){buf})"

    def load(self, buf: str, index: str, dtype: str) -> str:
        if dtype == "bool" and buf not in self._shared:
            return f"({buf}[{index}] != 0)"
        return f"{buf}[{index}]"

    def store(self, buf: str, index: str, value: Code, dtype: str) -> str:
        """The statement(s) writing `value` to buf[index] (lines without indentation)."""
        if dtype == "bool" and buf not in self._shared:
            return f"{buf}[{index}] = {S.unary(f'({self.storage(dtype)})', value).text};"
        return f"{buf}[{index}] = {value.text};"

    # ---- statements -------------------------------------------------------------------------
    def stmts(self, body, depth: int) -> list[str]:
        return [line for s in body for line in self.stmt(s, depth)]

    def stmt(self, s, depth: int) -> list[str]:
        pad = "    " * depth
        if isinstance(s, K.Comment):
            if s.text in self._said:      # strided / finalize variants repeat the same steps
                return []
            self._said.add(s.text)
            return [f"{pad}// {line}" for line in s.text.splitlines()]
        if isinstance(s, K.Declare):
            return [f"{pad}{self._declare(s.var, s.init)};"]
        if isinstance(s, K.Assign):
            return [f"{pad}{self._update(s.var, s.value)};"]
        if isinstance(s, K.Store):
            v = s.value
            if (s.buffer in self._shared and isinstance(v, K.KOp) and v.op in ("+", "-", "*")
                    and v.a == K.KLoad(s.buffer, s.index, v.dtype)):
                return [f"{pad}{s.buffer}[{self.kcode(s.index).text}] {v.op}= {self.kcode(v.b).text};"]
            dtype = self._buffer_dtypes[s.buffer]
            value = self._conv(v, dtype)
            buf = self._volatile(s.buffer, dtype) if s.volatile else s.buffer
            return [pad + line for line in self.store(buf, self.kcode(s.index).text, value, dtype).splitlines()]
        if isinstance(s, K.VecLoad):
            return self.vec_load(s, pad)
        if isinstance(s, K.LocalArray):
            return [f"{pad}{self.LOCAL_ARRAY.format(type=self.t(s.dtype), name=s.name, count=s.count)};"]
        if isinstance(s, K.SetLocal):
            return [f"{pad}{s.array}[{self.kcode(s.index).text}] = {self.kcode(s.value).text};"]
        if isinstance(s, K.VecStore):
            return self.vec_store(s, pad)
        if isinstance(s, K.Fence):
            return [f"{pad}{self._spelling('FENCE')};"]
        if isinstance(s, K.AtomicAdd):
            call = self._spelling("ATOMIC_ADD").format(buf=s.buffer, i=self.kcode(s.index).text,
                                                       v=self.kcode(s.value).text)
            return [f"{pad}{self.ident(s.var.name)} = {call};"]
        if isinstance(s, K.Barrier):
            return [f"{pad}{self.BARRIER};"]
        if isinstance(s, K.Epilogue):
            return self.stmts(s.body, depth)
        if isinstance(s, K.Continue):
            return [f"{pad}continue;"]
        if isinstance(s, K.Break):
            return [f"{pad}break;"]
        if isinstance(s, K.If):
            return self._if(s, pad, depth)
        if isinstance(s, K.For):
            v = s.var
            head = f"for ({self._declare(v, s.init)}; {self.kcode(s.cond).text}; {self._update(v, s.step)}) {{"
            return ([f"{pad}{self.UNROLL}"] if s.unroll and self.UNROLL else []) + \
                [pad + head, *self.stmts(s.body, depth + 1), f"{pad}}}"]
        raise TypeError(f"not a statement: {s!r}")

    def _if(self, s: K.If, pad: str, depth: int) -> list[str]:
        head = f"{pad}if ({self.kcode(s.cond).text})"
        simple = (K.Assign, K.Store, K.Continue, K.Break)
        if self.BRACELESS_IF and not s.orelse and len(s.then) == 1 and isinstance(s.then[0], simple):
            body = self.stmt(s.then[0], 0)
            if len(body) == 1:
                return [f"{head} {body[0]}"]
        lines = [f"{head} {{", *self.stmts(s.then, depth + 1)]
        if s.orelse:
            lines += [f"{pad}}} else {{", *self.stmts(s.orelse, depth + 1)]
        return lines + [f"{pad}}}"]

    # ---- kernels and the source file ---------------------------------------------------------
    def kernel(self, k: K.Kernel) -> str:
        self._shared = {a.name for a in k.shared}
        self._buffer_dtypes = {a.name: a.dtype for a in k.args if a.is_buffer}
        self._buffer_dtypes.update({a.name: a.dtype for a in k.shared})
        lines = [f"// {line}" for line in k.doc.splitlines()]
        lines.append(self.signature(k) + " {")
        lines += self.shared_arrays(k)
        lines += self.kernel_locals(k)
        lines += self.stmts(k.body, 1)
        lines.append("}")
        return "\n".join(lines)

    def shared_arrays(self, k: K.Kernel) -> list[str]:
        """Declarations of the kernel's block-shared arrays, at the top of its body."""
        return [f"    {self.SHARED} {self.t(a.dtype)} {a.name}[{a.size}];" for a in k.shared]

    def kernel_locals(self, k: K.Kernel) -> list[str]:
        """The thread coordinates the kernel uses as values, as int locals."""
        used = thread_kinds(k.body, bare_only=True)
        return [f"    const int {name} = {_unwrap(self.THREAD[kind])};"
                for kind, name in THREAD_LOCALS.items() if kind in used]

    def begin_module(self, kernels: list[K.Kernel]) -> None:
        """Called before the kernels of one source are printed (WGSL numbers its bindings)."""

    def module_scope(self, kernels: list[K.Kernel]) -> list[str]:
        """Module-scope declarations between the helpers and the kernels (WGSL's bindings)."""
        return []

    def render(self, kernels: list[K.Kernel], header: str) -> str:
        self._said = set()                           # comments already printed
        self.begin_module(kernels)
        bodies = [self.kernel(k) for k in kernels]   # first, so `helpers` is complete
        parts = [header.rstrip(), self.prelude().rstrip(), *self.helpers.values(),
                 *self.module_scope(kernels), *bodies]
        return "\n\n".join(p for p in parts if p) + "\n"
