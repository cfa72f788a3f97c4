"""Metal Shading Language: the table of spellings, then the overrides (argument attributes,
math functions Metal lacks). Metal has 64-bit integers (long) but no double.

Metal compiles with fast math by default, which reassociates and contracts `a * b + c` into
an fma: our results would no longer be NumPy's. So the source asks for safe math without
contraction itself (`#pragma METAL fp`, MSL 3.2+), and the KernelSet's options say what the
runtime must set for older language versions: MTLCompileOptions.mathMode = .safe with
mathFloatingPointFunctions = .precise (fastMathEnabled = false before macOS 15), or
`-fno-fast-math -ffp-contract=off` for the `metal` command-line compiler.
SIMD groups are 32 lanes on Apple GPUs but 8 to 64 on others: kernels read the width from
[[threads_per_simdgroup]] (lower/block.py), never assume it.
"""
from __future__ import annotations

from ..ir import kernel_ir as K
from ..capabilities import DialectCaps
from . import c_syntax as S
from .c_family import CFamily
from .kernel_print import thread_kinds


class Metal(CFamily):
    name = "metal"
    # no double; no forward-progress guarantee between threadgroups; SIMD-group shuffles;
    # atomic_fetch_add_explicit on int32 buffers
    CAPS = DialectCaps("Metal", float64=False, shuffles=True, buffer_atomics=True)
    TYPES = {"bool": "bool", "int8": "char", "int16": "short", "int32": "int", "int64": "long",
             "uint8": "uchar", "uint16": "ushort", "uint32": "uint", "uint64": "ulong",
             "float16": "float", "float32": "float"}
    STORAGE = {"bool": "uchar", "float16": "half"}
    UNSUPPORTED = {"float64": "Metal has no double type"}
    INT_SUFFIX = {"uint32": "u", "int64": "L", "uint64": "UL"}
    THREAD = {"local_id": "qc_lid", "group_id": "qc_group",
              "local_size": "qc_lsize", "num_groups": "qc_ngroups",
              "lane": "qc_lane", "warp": "qc_simd", "simd_width": "qc_simd_width"}
    # KThread.kind -> [[attribute]] of the kernel parameter (named THREAD[kind]) it comes from
    THREAD_ATTRS = {"local_id": "thread_position_in_threadgroup",
                    "group_id": "threadgroup_position_in_grid",
                    "local_size": "threads_per_threadgroup",
                    "num_groups": "threadgroups_per_grid",
                    "lane": "thread_index_in_simdgroup",
                    "warp": "simdgroup_index_in_threadgroup",
                    "simd_width": "threads_per_simdgroup"}
    BARRIER = "threadgroup_barrier(mem_flags::mem_threadgroup)"
    # int32 buffers only (the sort's folded counts): Metal has no 64-bit atomic add
    ATOMIC_ADD = "atomic_fetch_add_explicit((device atomic_int*)&{buf}[{i}], {v}, memory_order_relaxed)"
    SHARED = "threadgroup"
    SHUFFLE_DOWN = "simd_shuffle_down({v}, (ushort){o})"
    SHUFFLE_TYPES = ("int32", "uint32", "float16", "float32")
    BITCAST = {"float32": "as_type<float>({v})", "uint32": "as_type<uint>({v})"}
    OPTIONS = ("-fno-fast-math", "-ffp-contract=off")
    OPTIONS_WHY = ("no fast math, no FMA contraction: MTLCompileOptions.mathMode = .safe, "
                   "mathFloatingPointFunctions = .precise")
    UNROLL = ""
    HELPER_MATH = ("expm1", "log1p", "hypot", "cbrt")   # not in the Metal standard library
    # the launch plan's block size (launch.BLOCK) as the pipeline's limit: the compiler may
    # then use more registers per thread than for the default 1024
    KERNEL_HEAD = "[[max_total_threads_per_threadgroup({block})]]\nkernel void {name}"
    BUFFER_ARG = "device {const}{type}* {name} [[buffer({i})]]"
    SCALAR_ARG = "constant {type}& {name} [[buffer({i})]]"
    SCALAR_ARG_TYPES = {"bool": "uchar", "float16": "float"}
    HALF_LOAD = "(float){buf}[{i}]"             # half storage, float arithmetic (store: below)
    # wide loads of a thread's run (c_vector.py); device buffers are 16-byte aligned
    VECTOR_LOADS = True
    WORDS = {16: "uint4", 8: "uint2", 4: "uint", 2: "ushort"}
    WORDS64 = "ulong2"
    WIDE_LOAD = "*((device const {t}*)({p}))"
    WIDE_STORE = "*((device {t}*)({p})) = {v};"

    def half_from_bits(self, bits):
        return f"(float)as_type<half>({bits})"

    def half_to_bits(self, value):
        return f"as_type<ushort>((half){value})"

    def store(self, buf, index, value, dtype):
        if dtype == "float16" and buf not in self._shared:
            return f"{buf}[{index}] = {S.unary('(half)', value).text};"
        return super().store(buf, index, value, dtype)

    def extra_args(self, k: K.Kernel) -> list[str]:
        used = thread_kinds(k.body)     # only the coordinates the kernel reads
        return [f"uint {self.THREAD[kind]} [[{attr}]]" for kind, attr in self.THREAD_ATTRS.items() if kind in used]

    def prelude(self):
        return ("// Compile with fast math disabled (MTLCompileOptions.fastMathEnabled = false,\n"
                "// or -fno-fast-math) and no contraction of a * b + c: float results then match\n"
                "// NumPy bit for bit. From MSL 3.2 on the source says so itself.\n"
                "#include <metal_stdlib>\nusing namespace metal;\n"
                "#if __METAL_VERSION__ >= 320\n"
                "#pragma METAL fp math_mode(safe)\n"
                "#pragma METAL fp contract(off)\n"
                "#endif")

    def define_qc_round_f16(self):
        return ("// float rounded to float16 precision (ties to even), kept in a float\n"
                "static inline float qc_round_f16(float x) { return (float)(half)x; }")

    def define_qc_expm1(self):
        return ("// exp(x) - 1 without cancellation near 0 (Metal has no expm1)\n"
                "static inline float qc_expm1(float x) {\n"
                "    float u = exp(x);\n"
                "    if (u == 1.0f) return x;\n"
                "    if (isinf(u)) return u;   // inf / log(inf) would be NaN\n"
                "    float um1 = u - 1.0f;\n"
                "    // x / log(u) first: um1 * x overflows from x = 88 (expm1(88.72) is finite)\n"
                "    return um1 == -1.0f ? -1.0f : um1 * (x / log(u));\n"
                "}")

    def define_qc_log1p(self):
        return ("// log(1 + x) without cancellation near 0 (Metal has no log1p)\n"
                "static inline float qc_log1p(float x) {\n"
                "    float u = 1.0f + x;\n"
                "    if (u == INFINITY) return u;   // inf / inf would be NaN\n"
                "    // x / (u - 1) first: log(u) * x overflows near FLT_MAX\n"
                "    return u == 1.0f ? x : log(u) * (x / (u - 1.0f));\n"
                "}")

    def define_qc_cbrt(self):
        return ("// cube root (Metal has no cbrt), about 1 ulp: 2^(log2|x| / 3), then two Newton\n"
                "// steps y += (a / y^2 - y) / 3; zeros, NaN and infinities as C's cbrt\n"
                "static inline float qc_cbrt(float x) {\n"
                "    if (x == 0.0f || isnan(x) || isinf(x)) return x;\n"
                "    float a = fabs(x);\n"
                "    float y = exp2(log2(a) * 0.33333334f);\n"
                "    y = y + (a / (y * y) - y) * 0.33333334f;\n"
                "    y = y + (a / (y * y) - y) * 0.33333334f;\n"
                "    return copysign(y, x);\n"
                "}")

    def define_qc_hypot(self):
        return ("// sqrt(a*a + b*b) without overflow; inf wins over NaN as in C (Metal has no hypot)\n"
                "static inline float qc_hypot(float a, float b) {\n"
                "    a = fabs(a); b = fabs(b);\n"
                "    if (isinf(a) || isinf(b)) return INFINITY;\n"
                "    if (isnan(a) || isnan(b)) return NAN;   // Metal's max(0, NaN) is 0\n"
                "    float m = max(a, b), r = min(a, b) / m;\n"
                "    return m == 0.0f ? 0.0f : m * sqrt(1.0f + r * r);\n"
                "}")
