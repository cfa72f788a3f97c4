"""WGSL (WebGPU Shading Language, run through wgpu): the table of spellings, then the overrides.

WGSL is printed by the same walk as the C family (kernel_print.py, c_family.py); what it
spells differently is table entries (`var name: T = ...` declarations, `f32(x)` conversions,
`select(b, a, cond)` for the ternary, braces on every `if`, reserved words, u32 shift counts,
the lack of implicit conversions) and the overrides below: element semantics where WGSL and
NumPy disagree, packed narrow storage, and the module around the kernels.

Types. WGSL has no 64-bit types and no 8/16-bit integers:
  * int8/int16 live in i32 registers and uint8/uint16 in u32, wrapped back to their width
    after every operation that can leave it (`qc_wrap_<dtype>`), float16 lives in f32,
    rounded to half precision after every operation (`qc_round_f16`), as in the C dialects;
  * in buffers, bool, int8, uint8, int16, uint16 and float16 are packed into u32 words (the
    host's bytes as they are) and read / written a byte or half at a time; writes go through
    atomicAnd / atomicOr on the word, so two invocations writing neighbouring elements of one
    word never lose each other's write (a compaction scatters to arbitrary positions);
  * int64 / uint64 appear in kernel IR only as indexes and counts (CFamily.check_pass makes
    sure of it): they are i32 / u32 here, which holds any n a storage binding can (< 2^31).
    NumPy's 64-bit sums of bool / narrow integers (int64, uint64; float64 for their means)
    are kept exactly in two u32 words (CAPS.int64 False: ops/reduce/two_words.py). An element
    value of a 64-bit type (float64 data, int64 columns, qc.range) is refused by
    `check_pass` with the type named.
Element semantics are NumPy's (helpers in wgsl_helpers.py): wrap-around integers, Python
signed // and %, NaN-propagating min/max, NumPy's float -> int conversions, NumPy shifts.
NaN tests read the bits (never `x != x`, which a driver may fold away), and float32 `+ - * /`
results pass through `qc_exact` so that no driver rewrites two of them together (lavapipe did:
see qc_zero below).

Module layout (all of a KernelSet's kernels in one module, so one source text serves the
disk cache, `.source()` and every pipeline):
  * every buffer argument of any kernel is one module-scope storage variable with its own
    binding number in group 0, named as in the kernel IR (the partials one kernel writes
    and the next reads are one variable); `binding_layout` below is the one definition of the
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
"""
from __future__ import annotations

import math

from .. import dtypes as D
from ..ir import expr as E
from ..ir import kernel_ir as K
from ..capabilities import DialectCaps
from ..launch import BLOCK
from . import c_syntax as S
from . import wgsl_helpers
from .c_family import NO_64, CFamily
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


_ANGLES = ("<", "<=", ">", ">=", "<<", ">>")


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
    return p.scalar_type(a.dtype)


_BINOPS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/"}
_BOOL_OPS = {"and": "&&", "min": "&", "bitand": "&", "mul": "&",
             "or": "||", "max": "|", "bitor": "|", "add": "|", "bitxor": "!=", "sub": "!="}


class Wgsl(CFamily):
    name = "webgpu"
    # no 64-bit types (int64 / uint64 are index types here, printed i32 / u32: check_pass);
    # no forward-progress guarantee between workgroups; subgroups optional in WebGPU (not
    # used: shared-memory trees everywhere); atomics only on atomic<T> buffers
    CAPS = DialectCaps("WGSL", int64=False, float64=False)
    TYPES = {"bool": "bool", "int8": "i32", "int16": "i32", "int32": "i32", "int64": "i32",
             "uint8": "u32", "uint16": "u32", "uint32": "u32", "uint64": "u32",
             "float16": "f32", "float32": "f32"}
    PACKED = {"bool": 8, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "float16": 16}  # bits in a u32 word
    STORAGE = {dtype: "u32" for dtype in PACKED}
    UNSUPPORTED = {"float64": NO_64.format(language="WGSL")}
    INT_SUFFIX = {d: "u" if t == "u32" else "i" for d, t in TYPES.items() if t in ("i32", "u32")}
    SCALAR_ARG_TYPES = {"bool": "u32", "float16": "f32"}   # scalar arguments (launch.SCALAR_HOST_TYPE)
    BARRIER = "workgroupBarrier()"
    SHUFFLE_DOWN = ""        # subgroups are optional in WebGPU: shared-memory trees everywhere
    UNROLL = ""
    FOLD_RUNS_APART = True   # lavapipe (CI) runs WGSL on the CPU, like pocl
    # a reduction's stage 2 binds every partial and result: split by aggregate into kernels of at
    # most 16 (stage 1 binds the partials alone; lavapipe allows 32 storage buffers a kernel)
    FINALIZE_BUFFERS = 16
    # the language (kernel_print.py): no implicit conversions, `var x: T = e`, braces always
    IMPLICIT_CONVERSIONS = False
    DECLARE = "var {name}: {type} = {value}"
    LOCAL_ARRAY = "var {name}: array<{type}, {count}>"
    BRACELESS_IF = False
    FLOAT_INCREMENT = False
    INT_WRAPS = True         # i32 / u32 arithmetic wraps; narrow types through `wrap`
    RESERVED = RESERVED
    MATH = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh",
            "arccosh": "acosh", "arctanh": "atanh", "rint": "round", "fabs": "abs"}
    CAST_HELPER = "qc_cast_{dst}"     # float16 and float32 are both f32 here
    HELPERS = wgsl_helpers
    HELPER_MATH = ("expm1", "log1p", "hypot", "atan2", "copysign", "log10", "pow", "tanh", "fmod", "exp2", "cbrt",
                   "sin", "cos", "tan", "exp", "log", "sinh", "cosh", "log2", "arcsinh", "arccosh",
                   "arctanh", "arctan", "arcsin", "arccos")      # wgsl_helpers defines them

    def ternary(self, cond: Code, a: Code, b: Code) -> Code:
        return select(b, a, cond)

    def type_cast(self, x: Code, dtype: str) -> Code:
        return S.call(self.t(dtype), x)

    def wrap(self, x: Code, dtype: str) -> Code:
        """A value of a narrow integer type brought back into its range (bool needs nothing)."""
        if dtype in ("int8", "int16", "uint8", "uint16"):
            return S.call(self.need(f"qc_wrap_{dtype}"), x)
        return x

    # ---- literals --------------------------------------------------------------------------
    def bitcast(self, to: str, value: str) -> str:
        """A float from its bits through qc_f32_bits (C's float_literal spells NaN and inf so):
        `bitcast<f32>` of a constant is a constant expression, and WGSL refuses a non-finite one."""
        return f"{self.need('qc_f32_bits')}({value})" if to == "float32" else f"bitcast<u32>({value})"

    def int_literal(self, v: int, dtype: str) -> Code:
        if self.TYPES[dtype] == "u32":
            v = min(v, 2 ** 32 - 1)
        else:
            v = max(min(v, 2 ** 31 - 1), -2 ** 31)   # int64 indexes: INT64_MAX ("none") -> INT32_MAX
        if v == -2 ** 31:
            return Code("i32(-2147483648)")      # 2147483648i would not parse
        return S.literal(f"{v}{self.INT_SUFFIX[dtype]}")

    # ---- element expressions ---------------------------------------------------------------
    def cmp(self, op: str, a: Code, b: Code, dtype: str) -> Code:
        if dtype == "bool" and op not in ("eq", "ne"):   # WGSL orders no bools: as u32
            a, b = S.call("u32", a), S.call("u32", b)
        if op == "ne" and D.is_float(dtype):
            # naga emits `!=` as an ordered compare (false when either side is NaN); IEEE
            # and NumPy say NaN != x is true (a cast to bool too): the negated ordered `==` is.
            return S.unary("!", S.binary(a, "==", b))
        return super().cmp(op, a, b, dtype)

    def unary(self, e: E.Unary) -> Code:
        if e.op == "abs" and D.is_float(e.dtype):
            # the sign bit cleared: drivers drop abs() of values they prove >= 0 (lavapipe:
            # abs(sqrt(-0.0)) is -0.0 there), an integer mask they keep
            return Code(f"bitcast<f32>(bitcast<u32>({self.code(e.x).text}) & 0x7FFFFFFFu)")
        return super().unary(e)

    def binop(self, e: E.Binary, a: Code, b: Code) -> Code:
        d, o = e.dtype, e.op
        if d == "bool" and o in _BOOL_OPS:            # NumPy's bool arithmetic, never via integers
            return S.binary(a, _BOOL_OPS[o], b)
        if o in ("min", "max") and not D.is_float(d):
            return S.call(o, a, b)                     # exact on integers
        if o in ("floordiv", "mod", "lshift", "rshift", "min", "max") or (o == "pow" and not D.is_float(d)):
            out = S.call(self.need(f"qc_{o}_{d}"), a, b)
            # a float16 // or % is computed in f32 (NumPy's half loops do too): round it
            # to half precision like every other float16 operation, before it is stored
            return self.f16(out, d) if D.is_float(d) else self.wrap(out, d)
        if D.is_float(d) and o in ("mul", "add", "sub", "truediv"):
            folded = self._unfoldable(e, a, b, d)
            if folded is not None:
                return folded
            if o == "sub" and a.text == b.text:
                # x - x: drivers that treat WGSL arithmetic as inexact fold it to 0 (lavapipe's NIR
                # does, depending on the shader around it), but IEEE gives NaN for NaN and inf
                bad = f"{self.need('qc_isnan')}({a.text}) || {self.need('qc_isinf')}({a.text})"
                nan = f"{self.need('qc_f32_bits')}(0x7FC00000u)"
                return self.f16(Code(f"select(0.0f, {nan}, {bad})"), d)
            # float32 results through qc_exact, which no compiler sees through: lavapipe's NIR
            # treats WGSL arithmetic as inexact and rewrote (a - b) + b to a, b + 3 + 3 to b + 6
            # (float16 results are rounded by a helper already)
            out = S.binary(a, _BINOPS[o], b)
            return self.f16(S.call(self.need("qc_exact"), out) if d == "float32" else out, d)
        return super().binop(e, a, b)     # math functions; integers wrap (INT_WRAPS)

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

    def predicate(self, fn: str, x: Code) -> Code:
        return S.call(self.need(f"qc_{fn}"), x)        # on the bits: see the module docstring

    # ---- packed storage: bool / 8-bit / 16-bit / float16 elements in u32 words ----------------
    def _word(self, buf: str, index: str, dtype: str) -> str:
        """The u32 word holding element `index` of packed buffer `buf`."""
        per_word = 32 // self.PACKED[dtype]
        word = f"{buf}[u32({index}) >> {per_word.bit_length() - 1}u]"
        return f"atomicLoad(&{word})" if self._layout[0][buf][2] else word

    def load(self, buf: str, index: str, dtype: str) -> str:
        if buf in self._shared or dtype not in self.PACKED:
            return f"{buf}[{index}]"
        part = f"{self.need(f'qc_unpack{self.PACKED[dtype]}')}({self._word(buf, index, dtype)}, {index})"
        if dtype == "bool":
            return f"({part} != 0u)"
        if dtype == "float16":
            return f"{self.need('qc_h2f')}({part})"
        if D.is_signed(dtype):
            return f"{self.need(f'qc_wrap_{dtype}')}(i32({part}))"
        return part

    def store(self, buf: str, index: str, value: Code, dtype: str) -> str:
        """A packed element is cleared and set with atomicAnd / atomicOr on its word, so
        neighbouring elements written by other invocations are never lost."""
        if buf in self._shared or dtype not in self.PACKED:
            return f"{buf}[{index}] = {value.text};"
        bits = self.PACKED[dtype]
        mask = f"0x{(1 << bits) - 1:X}u"
        v = f"{self.need('qc_f2h')}({value.text})" if dtype == "float16" else f"u32({value.text})"
        per_word = 32 // bits
        word = f"{buf}[qc_at >> {per_word.bit_length() - 1}u]"
        return "\n".join(["{", f"    let qc_at = u32({index});",
                          f"    let qc_shift = (qc_at & {per_word - 1}u) * {bits}u;",
                          f"    atomicAnd(&{word}, ~({mask} << qc_shift));",
                          f"    atomicOr(&{word}, ({v} & {mask}) << qc_shift);", "}"])

    # ---- entry points and the module ---------------------------------------------------------
    def signature(self, k: K.Kernel) -> str:
        return (f"@compute @workgroup_size({BLOCK})\n"
                f"fn {k.name}(@builtin(local_invocation_id) qc_local: vec3<u32>,\n"
                "        @builtin(workgroup_id) qc_wg: vec3<u32>,\n"
                "        @builtin(num_workgroups) qc_nwg: vec3<u32>)")

    def shared_arrays(self, k: K.Kernel) -> list[str]:
        """Workgroup arrays are module-scope: one declaration per name (module_scope)."""
        for a in k.shared:
            decl = f"var<workgroup> {a.name}: array<{self.t(a.dtype)}, {a.size}>;"
            if self._workgroup.setdefault(a.name, decl) != decl:
                raise ValueError(f"workgroup array {a.name!r} declared twice with different types")
        return []

    def kernel_locals(self, k: K.Kernel) -> list[str]:
        """The block number of a 2-D dispatch (padding blocks return), qc_zero, the thread
        coordinates, and the scalar arguments read from the kernel's struct."""
        uni = f"{k.name}_a"
        lines = ["    let group = i32(qc_wg.x + qc_wg.y * qc_nwg.x);",
                 f"    if (group >= {uni}.qc_grid) {{ return; }}   // padding of a 2-D dispatch",
                 f"    qc_zero = u32({uni}.qc_grid) >> 31u;   // 0 (the grid is positive), unknown to the compiler",
                 "    let lid = i32(qc_local.x);",
                 f"    let block_size = {BLOCK}i;",
                 f"    let num_groups = {uni}.qc_grid;"]
        for a in k.args:
            if a.kind in SCALAR_KINDS:
                read = f"{uni}.{self.ident(a.name)}"
                if a.kind == "param" and a.dtype == "bool":
                    read = f"{read} != 0u"
                lines.append(f"    let {self.ident(a.name)}: {self.t(a.dtype)} = {read};")
        return lines

    def begin_module(self, kernels) -> None:
        self._workgroup: dict[str, str] = {}
        self._layout = binding_layout(kernels)

    def module_scope(self, kernels) -> list[str]:
        """The storage bindings, each kernel's scalar struct, qc_zero, the workgroup arrays."""
        buffers, uniforms = self._layout
        out = []
        for name, (b, dtype, writable) in buffers.items():
            elem = "atomic<u32>" if dtype in self.PACKED and writable else self.storage(dtype)
            access = "read_write" if writable else "read"
            out.append(f"@group(0) @binding({b}) var<storage, {access}> {name}: array<{elem}>;")
        for k in kernels:
            members = [f"    {self.ident(a.name)}: {scalar_member_type(self, a)}," for a in k.args
                       if a.kind in SCALAR_KINDS]
            out.append(f"struct {k.name}_args {{\n" + "\n".join(members + ["    qc_grid: i32,"]) + "\n}")
            out.append(f"@group(0) @binding({uniforms[k.name]}) var<storage, read> {k.name}_a: {k.name}_args;")
        return ["\n".join(out + ["var<private> qc_zero: u32;"]), "\n".join(self._workgroup.values())]

    def prelude(self) -> str:
        return "// Packed storage: bool / 8-bit / 16-bit / float16 buffers hold 4 or 2 elements per u32 word."
