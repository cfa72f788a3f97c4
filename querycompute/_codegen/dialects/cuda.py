"""CUDA C (compiled by NVRTC): the table of spellings, then the few overrides."""
from __future__ import annotations

from ..capabilities import DialectCaps
from . import c_syntax as S
from .c_family import CFamily


class Cuda(CFamily):
    name = "cuda"
    # CUDA's blocks make forward progress (a block may wait for an earlier one's value: the
    # look-back scans); warp shuffles of 32-bit and 64-bit values; atomicAdd on any buffer;
    # __threadfence: a reduction's last block reads the others' partials (one launch)
    CAPS = DialectCaps("CUDA C", forward_progress=True, shuffles=True, buffer_atomics=True, device_fence=True)
    TYPES = {"bool": "bool", "int8": "signed char", "int16": "short", "int32": "int",
             "int64": "long long", "uint8": "unsigned char", "uint16": "unsigned short",
             "uint32": "unsigned int", "uint64": "unsigned long long",
             "float16": "float", "float32": "float", "float64": "double"}
    STORAGE = {"bool": "unsigned char", "float16": "unsigned short"}   # half bits, converted by cvt
    INT_SUFFIX = {"uint32": "u", "int64": "LL", "uint64": "ULL"}
    THREAD = {"local_id": "threadIdx.x", "group_id": "blockIdx.x",
              "local_size": "blockDim.x", "num_groups": "gridDim.x",
              "lane": "(threadIdx.x & 31)", "warp": "(threadIdx.x >> 5)", "simd_width": "32"}
    BARRIER = "__syncthreads()"
    SHARED = "__shared__"
    SHUFFLE_DOWN = "__shfl_down_sync(0xffffffffu, {v}, {o})"
    SHUFFLE = "__shfl_sync(0xffffffffu, {v}, {l})"
    SHUFFLE_TYPES = ("int32", "uint32", "int64", "uint64", "float16", "float32", "float64")
    BITCAST = {"float32": "__uint_as_float({v})", "uint32": "__float_as_uint({v})",
               "float64": "__longlong_as_double((long long){v})",
               "uint64": "(unsigned long long)__double_as_longlong({v})"}
    FUNC = "static __device__ __forceinline__"
    FENCE = "__threadfence()"
    ATOMIC_ADD = "atomicAdd(&{buf}[{i}], {v})"
    VOLATILE = "volatile"
    OPTIONS = ("--fmad=false",)
    OPTIONS_WHY = "no FMA contraction, so float results match NumPy bit for bit"
    KERNEL_HEAD = 'extern "C" __global__ void __launch_bounds__({block}{min_blocks}) {name}'
    BUFFER_ARG = "{const}{type}* __restrict__ {name}"
    SCALAR_ARG_TYPES = {"bool": "unsigned char", "float16": "float"}
    HALF_LOAD = "{h2f}({buf}[{i}])"                  # half bits <-> float: the cvt instructions
    HALF_STORE = "{buf}[{i}] = {f2h}({v});"
    # wide loads of a thread's run (c_vector.py): read-only, restrict -> ld.global.nc.v4
    VECTOR_LOADS = True
    WORDS = {16: "uint4", 8: "uint2", 4: "unsigned int", 2: "unsigned short"}
    WORDS64 = "ulonglong2"
    WIDE_LOAD = "*reinterpret_cast<const {t}*>({p})"
    WIDE_STORE = "*reinterpret_cast<{t}*>({p}) = {v};"     # -> st.global.v4

    def math(self, fn, dtype):
        """CUDA's C math library: float versions carry an `f` suffix (sqrtf, fmodf...)."""
        base = super().math(fn, dtype)
        return base + "f" if dtype in ("float32", "float16") else base

    def unary(self, e):
        # -x of a 16-bit integer: negated in 32 bits, truncated by an opaque cvt. The ptxas of
        # NVRTC 13.0 folds sext16(neg.s16 x) into neg.s32(sext16 x), wrong for x = -32768
        # (`-v == v` came out False on an H100; NVRTC 13.5's ptxas is right): the cvt keeps
        # the truncation in the SASS (a PRMT sign extension), whatever version compiles it.
        if e.op == "neg" and e.dtype in ("int16", "uint16"):
            wide = S.unary("(unsigned int)", S.unary("-", S.unary("(int)", self.code(e.x))))
            return S.unary(f"({self.t(e.dtype)})", S.call(self.need("qc_trunc16"), wide))
        return super().unary(e)

    def define_qc_trunc16(self):
        return """// the low 16 bits, by a PTX cvt that ptxas cannot fold away (see unary above)
static __device__ __forceinline__ unsigned short qc_trunc16(unsigned int v) {
    unsigned short r;
    asm("cvt.u16.u32 %0, %1;" : "=h"(r) : "r"(v));
    return r;
}"""

    def half_from_bits(self, bits):
        return f"{self.need('qc_h2f')}({bits})"

    def half_to_bits(self, value):
        return f"{self.need('qc_f2h')}({value})"

    # float16: buffers hold half bits; values live in floats. The conversions are the
    # hardware's (PTX cvt, one instruction each; cvt.rn rounds to nearest even, as NumPy's
    # astype(float16) does). NVRTC ships no cuda_fp16.h, hence the inline PTX. (A NaN comes
    # back as the canonical half NaN: NaN payloads are not kept.)
    def define_qc_h2f(self):
        return """// IEEE half bits -> float (exact)
static __device__ __forceinline__ float qc_h2f(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}"""

    def define_qc_f2h(self):
        return """// float -> IEEE half bits, round to nearest even (what numpy's astype(float16) does)
static __device__ __forceinline__ unsigned short qc_f2h(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}"""

    def define_qc_round_f16(self):
        return (f"// float rounded to float16 precision (ties to even), kept in a float\n"
                f"{self.FUNC} float qc_round_f16(float x) {{ return {self.need('qc_h2f')}({self.need('qc_f2h')}(x)); }}")
