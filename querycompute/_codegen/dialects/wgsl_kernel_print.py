"""Printing of kernel IR as one WGSL module: bindings, workgroup arrays, entry points, statements.

Module layout (all of a KernelSet's kernels in one module, so one source text serves the
disk cache, `.source()` and every pipeline):
  * every buffer argument of any kernel is one module-scope storage variable with its own
    binding number in group 0, named as in the kernel IR (the partials one kernel writes
    and the next reads are one variable); `binding_layout` is the one definition of the
    numbers, shared with the runtime (backends/webgpu.py);
  * each kernel's scalar arguments (n, strides, parameters, values) and its logical grid
    size `qc_grid` live in one struct per kernel (`<kernel>_a`), read into `let`s at the
    top of the entry point; every member is 4 bytes (int64 indexes are i32). The struct is a
    read-only *storage* buffer, not a uniform: lavapipe specialises a shader on the values
    of uniforms that steer its control flow, then folds float arithmetic with them
    inexactly (a captured 0.0 times inf gave 0); a storage value no compiler can see;
  * `qc_zero` (module-scope, private) is 0, derived from `qc_grid` at the top of every
    entry point so that no compiler knows it: the float32 result of each `+ - * /` of the
    lambdas is spelled `qc_exact(a + b)` (wgsl_helpers), its bits or-ed with it, so a driver
    that treats WGSL arithmetic as inexact cannot rewrite two operations together (lavapipe
    computed `(a - b) + b` as `a`, `b + 3.0 + 3.0` as `b + 6.0`, `3.0 - (b + 3.0)` as `-b`);
  * workgroup arrays are module-scope `var<workgroup>` (one per name: kernels that use the
    same name use the same declaration);
  * entry points are `@compute @workgroup_size(BLOCK)`; the grid may be dispatched in 2-D
    (at most 65,535 workgroups per dimension), so the block number is x + y * width and
    blocks at or past `qc_grid` return at once (the test is uniform across the workgroup,
    so barriers after it stay in uniform control flow).
Storage of narrow types (bool, int8, uint8, int16, uint16, float16): packed in u32 words
(see wgsl.py); reads extract the byte / half, writes clear and set it with atomicAnd /
atomicOr, so neighbouring elements written by other invocations are never lost.
"""
from __future__ import annotations

from .. import dtypes as D
from .. import expr as E
from .. import kernel_ir as K
from ..launch import BLOCK
from . import c_syntax as S
from .c_kernel_print import THREAD_LOCALS
from .c_syntax import Code

SCALAR_KINDS = ("stride", "param", "n", "value")
# WGSL's keywords and reserved words that kernel IR may use as local names (spec section
# "Reserved Words"): printed with a trailing underscore (`ident`).
RESERVED = frozenset("""
    active alias as asm async attribute auto await become break case cast catch class const
    const_assert continue continuing default demote discard do dynamic_cast else enum explicit
    export extends extern external fallthrough filter final finally fn for friend from fxgroup
    get goto groupshared highp if impl implements import inline instanceof interface layout let
    loop lowp macro macro_rules match mediump meta mod module move mut mutable namespace new nil
    noexcept noinline nointerpolation noperspective null nullptr of operator override package
    packoffset partition pass patch pixelfragment precise precision premerge priv protected pub
    public readonly ref regardless register reinterpret_cast require resource return self set
    shared sizeof smooth snorm static static_assert static_cast std struct subroutine super
    switch target template this thread_local throw trait try type typedef typeid typename typeof
    union unless unorm unsafe unsized use using var varying virtual volatile wgsl where while
    with writeonly yield""".split())


def ident(name: str) -> str:
    """A kernel IR name as a WGSL identifier (reserved words get a trailing underscore)."""
    return name + "_" if name in RESERVED else name
_UPDATES = ("+", "-", "*", ">>", "<<")
_ANGLES = ("<", "<=", ">", ">=", "<<", ">>")
_FLOAT_UPDATES = {"add": "+", "sub": "-", "mul": "*"}


def binding_layout(kernels) -> tuple[dict, dict]:
    """({buffer name: (binding, dtype, writable)}, {kernel name: binding of its scalar
    struct}) for kernels with `.name` and `.args` (kernel_ir.Kernel or launch.KernelSpec):
    buffers first, in order of first appearance, then one scalar struct per kernel."""
    buffers: dict[str, tuple[int, str, bool]] = {}
    for k in kernels:
        for a in k.args:
            if not a.is_buffer:
                continue
            writable = a.kind != "input"
            have = buffers.get(a.name)
            if have is None:
                buffers[a.name] = (len(buffers), a.dtype, writable)
            elif have[1] != a.dtype:
                raise ValueError(f"buffer {a.name!r} has dtypes {have[1]} and {a.dtype} in one kernel set")
            elif writable and not have[2]:
                buffers[a.name] = (have[0], have[1], True)
    uniforms = {k.name: len(buffers) + j for j, k in enumerate(kernels)}
    return buffers, uniforms


def select(f: Code, t: Code, cond: Code) -> Code:
    """WGSL's `select(f, t, cond)`, a comparison argument parenthesised: WGSL reads
    `x < 3.0f, x > 1.0f` in an argument list as a template list (naga does), so
    `select(false, x < 3.0f, x > 1.0f)` would not compile."""
    return S.call("select", *(Code(f"({a.text})") if a.op in _ANGLES else a for a in (f, t, cond)))


def scalar_member_type(p, a) -> str:
    """WGSL type of a scalar argument in its kernel's scalar struct."""
    if a.kind != "param":
        return "i32"
    return p.SCALAR_TYPES.get(a.dtype) or p.t(a.dtype)


class WgslKernelPrinter:
    # ---- kernel expressions -----------------------------------------------------------------
    def kcode(self, e) -> Code:
        if isinstance(e, K.Elem):
            return self.code(e.expr)
        if isinstance(e, K.KVar):
            return Code(ident(e.name))
        if isinstance(e, K.KConst):
            return self.lit(e.value, e.dtype)
        if isinstance(e, K.KOp):
            a, b = self.kcode(e.a), self.kcode(e.b)
            if e.op in (">>", "<<"):
                b = self._shift_count(e.b)
            return S.binary(a, e.op, b)
        if isinstance(e, K.KSelect):
            return select(self._conv(e.b, e.dtype), self._conv(e.a, e.dtype), self.kcode(e.cond))
        if isinstance(e, K.KCast):
            return self._conv(e.x, e.dtype)
        if isinstance(e, K.KThread):
            return Code(THREAD_LOCALS[e.kind])
        if isinstance(e, K.KLoad):
            if e.volatile:
                raise ValueError("the webgpu printer has no volatile accesses (only kernels that "
                                 "publish values between blocks use them)")
            return Code(self.load(e.buffer, self.kcode(e.index).text, e.dtype))
        raise TypeError(f"the webgpu printer has no spelling for {type(e).__name__}")

    def _shift_count(self, e) -> Code:
        if isinstance(e, K.KConst):
            return Code(f"{int(e.value)}u")
        return S.call("u32", self.kcode(e))

    def _conv(self, e, dtype: str) -> Code:
        """Kernel expression `e` as a value of register type t(dtype) (WGSL converts nothing
        implicitly: a count read from an i32 buffer into a u32 register, a bool into u32)."""
        code = self.kcode(e)
        src = getattr(e, "dtype", dtype)
        if isinstance(e, K.KConst):
            return self.lit(e.value, dtype)
        if self.t(src) == self.t(dtype):
            return code
        if dtype == "bool":
            return S.binary(code, "!=", self.lit(0, src))
        return S.call(self.t(dtype), code)

    # ---- buffer accesses --------------------------------------------------------------------
    def _word(self, buf: str, index: str, dtype: str) -> tuple[str, str]:
        """(the u32 word holding element `index` of packed buffer `buf`, the element's index)."""
        per_word = 32 // self.PACKED[dtype]
        at = f"u32({index}) >> {per_word.bit_length() - 1}u"
        word = f"{buf}[{at}]"
        return (f"atomicLoad(&{word})" if self._layout[0][buf][2] else word), index

    def load(self, buf: str, index: str, dtype: str) -> str:
        if buf in self._shared or dtype not in self.PACKED:
            return f"{buf}[{index}]"
        word, i = self._word(buf, index, dtype)
        bits = self.PACKED[dtype]
        part = f"{self.need(f'qc_unpack{bits}')}({word}, {i})"
        if dtype == "bool":
            return f"({part} != 0u)"
        if dtype == "float16":
            return f"{self.need('qc_h2f')}({part})"
        if D.is_signed(dtype):
            return f"{self.need(f'qc_wrap_{dtype}')}(i32({part}))"
        return part

    def store(self, buf: str, index: str, value: Code, dtype: str, pad: str) -> list[str]:
        if buf in self._shared or dtype not in self.PACKED:
            return [f"{pad}{buf}[{index}] = {value.text};"]
        bits = self.PACKED[dtype]
        mask = f"0x{(1 << bits) - 1:X}u"
        v = f"{self.need('qc_f2h')}({value.text})" if dtype == "float16" else f"u32({value.text})"
        per_word = 32 // bits
        return [f"{pad}{{",
                f"{pad}    let qc_at = u32({index});",
                f"{pad}    let qc_shift = (qc_at & {per_word - 1}u) * {bits}u;",
                f"{pad}    atomicAnd(&{buf}[qc_at >> {per_word.bit_length() - 1}u], ~({mask} << qc_shift));",
                f"{pad}    atomicOr(&{buf}[qc_at >> {per_word.bit_length() - 1}u], ({v} & {mask}) << qc_shift);",
                f"{pad}}}"]

    # ---- statements -------------------------------------------------------------------------
    def _update(self, var: K.KVar, value) -> str:
        """`var = value` as `var++` / `var op= x` when value is `var op x`."""
        if isinstance(value, K.KOp) and value.a == var and value.op in _UPDATES:
            if value.op == "+" and isinstance(value.b, K.KConst) and value.b.value == 1:
                return f"{ident(var.name)}++"
            rhs = self._shift_count(value.b) if value.op in (">>", "<<") else self.kcode(value.b)
            return f"{ident(var.name)} {value.op}= {rhs.text}"
        if isinstance(value, K.Elem) and isinstance(value.expr, E.Binary):
            x = value.expr
            if x.op in ("add", "sub", "mul") and x.dtype == "float32" and x.a == E.Var(var.name, var.dtype):
                return f"{ident(var.name)} {_FLOAT_UPDATES[x.op]}= {self.ex(x.b)}"
        return f"{ident(var.name)} = {self._conv(value, var.dtype).text}"

    def stmts(self, body, depth: int) -> list[str]:
        return [line for s in body for line in self.stmt(s, depth)]

    def stmt(self, s, depth: int) -> list[str]:
        pad = "    " * depth
        if isinstance(s, K.Comment):
            if s.text in self._said:
                return []
            self._said.add(s.text)
            return [f"{pad}// {line}" for line in s.text.splitlines()]
        if isinstance(s, K.Declare):
            return [f"{pad}var {ident(s.var.name)}: {self.t(s.var.dtype)} = {self._conv(s.init, s.var.dtype).text};"]
        if isinstance(s, K.Assign):
            return [f"{pad}{self._update(s.var, s.value)};"]
        if isinstance(s, K.Store):
            dtype = self._buffer_dtypes[s.buffer]
            v = s.value
            if (s.buffer in self._shared and isinstance(v, K.KOp) and v.op in ("+", "-", "*")
                    and v.a == K.KLoad(s.buffer, s.index, v.dtype)):
                return [f"{pad}{s.buffer}[{self.kcode(s.index).text}] {v.op}= {self.kcode(v.b).text};"]
            value = self._conv(v, dtype) if (dtype not in self.PACKED or s.buffer in self._shared) else self.kcode(v)
            return self.store(s.buffer, self.kcode(s.index).text, value, dtype, pad)
        if isinstance(s, K.Barrier):
            return [f"{pad}{self.BARRIER};"]
        if isinstance(s, K.Continue):
            return [f"{pad}continue;"]
        if isinstance(s, K.Break):
            return [f"{pad}break;"]
        if isinstance(s, K.If):
            lines = [f"{pad}if ({self.kcode(s.cond).text}) {{", *self.stmts(s.then, depth + 1)]
            if s.orelse:
                lines += [f"{pad}}} else {{", *self.stmts(s.orelse, depth + 1)]
            return lines + [f"{pad}}}"]
        if isinstance(s, K.For):
            v = s.var
            head = (f"for (var {ident(v.name)}: {self.t(v.dtype)} = {self._conv(s.init, v.dtype).text}; "
                    f"{self.kcode(s.cond).text}; {self._update(v, s.step)}) {{")
            return [pad + head, *self.stmts(s.body, depth + 1), f"{pad}}}"]
        raise ValueError(f"the webgpu printer has no spelling for {type(s).__name__} (kernels that "
                         "publish values between blocks are not printed for WGSL)")

    # ---- kernels and the module -------------------------------------------------------------
    def kernel(self, k: K.Kernel) -> str:
        self._shared = {a.name for a in k.shared}
        self._buffer_dtypes = {a.name: a.dtype for a in k.args if a.is_buffer}
        self._buffer_dtypes.update({a.name: a.dtype for a in k.shared})
        for a in k.shared:
            decl = f"var<workgroup> {a.name}: array<{self.t(a.dtype)}, {a.size}>;"
            if self._workgroup.setdefault(a.name, decl) != decl:
                raise ValueError(f"workgroup array {a.name!r} declared twice with different types")
        uni = f"{k.name}_a"
        lines = [f"// {line}" for line in k.doc.splitlines()]
        lines += [f"@compute @workgroup_size({BLOCK})",
                  f"fn {k.name}(@builtin(local_invocation_id) qc_local: vec3<u32>,",
                  "        @builtin(workgroup_id) qc_wg: vec3<u32>,",
                  "        @builtin(num_workgroups) qc_nwg: vec3<u32>) {",
                  "    let group = i32(qc_wg.x + qc_wg.y * qc_nwg.x);",
                  f"    if (group >= {uni}.qc_grid) {{ return; }}   // padding of a 2-D dispatch",
                  f"    qc_zero = u32({uni}.qc_grid) >> 31u;   // 0 (the grid is positive), unknown to the compiler",
                  "    let lid = i32(qc_local.x);",
                  f"    let block_size = {BLOCK}i;",
                  f"    let num_groups = {uni}.qc_grid;"]
        for a in k.args:
            if a.kind in SCALAR_KINDS:
                read = f"{uni}.{ident(a.name)}"
                if a.kind == "param" and a.dtype == "bool":
                    read = f"{read} != 0u"
                lines.append(f"    let {ident(a.name)}: {self.t(a.dtype)} = {read};")
        lines += self.stmts(k.body, 1)
        lines.append("}")
        return "\n".join(lines)

    def _declarations(self, kernels) -> list[str]:
        buffers, uniforms = self._layout
        out = []
        for name, (b, dtype, writable) in buffers.items():
            elem = self.storage(dtype)
            if dtype in self.PACKED and writable:
                elem = "atomic<u32>"
            access = "read_write" if writable else "read"
            out.append(f"@group(0) @binding({b}) var<storage, {access}> {name}: array<{elem}>;")
        for k in kernels:
            members = [f"    {ident(a.name)}: {scalar_member_type(self, a)}," for a in k.args if a.kind in SCALAR_KINDS]
            out.append(f"struct {k.name}_args {{\n" + "\n".join(members + ["    qc_grid: i32,"]) + "\n}")
            out.append(f"@group(0) @binding({uniforms[k.name]}) var<storage, read> {k.name}_a: {k.name}_args;")
        return out + ["var<private> qc_zero: u32;"]

    def render(self, kernels: list[K.Kernel], header: str) -> str:
        self._said = set()
        self._workgroup: dict[str, str] = {}
        self._layout = binding_layout(kernels)
        bodies = [self.kernel(k) for k in kernels]   # first, so `helpers` is complete
        parts = [header.rstrip(),
                 "// Packed storage: bool / 8-bit / 16-bit / float16 buffers hold 4 or 2 elements per u32 word.",
                 *self.helpers.values(), "\n".join(self._declarations(kernels)),
                 "\n".join(self._workgroup.values()), *bodies]
        return "\n\n".join(p for p in parts if p) + "\n"
