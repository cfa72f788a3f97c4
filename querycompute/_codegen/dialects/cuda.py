"""CUDA C (compiled by NVRTC): the table of spellings, then the few overrides."""
from __future__ import annotations

from .c_family import CFamily


class Cuda(CFamily):
    name = "cuda"
    TYPES = {"bool": "bool", "int8": "signed char", "int16": "short", "int32": "int",
             "int64": "long long", "uint8": "unsigned char", "uint16": "unsigned short",
             "uint32": "unsigned int", "uint64": "unsigned long long",
             "float16": "float", "float32": "float", "float64": "double"}
    STORAGE = {"bool": "unsigned char", "float16": "unsigned short"}   # half bits, converted in software
    INT_SUFFIX = {"uint32": "u", "int64": "LL", "uint64": "ULL"}
    THREAD = {"local_id": "threadIdx.x", "group_id": "blockIdx.x",
              "local_size": "blockDim.x", "num_groups": "gridDim.x",
              "lane": "(threadIdx.x & 31)", "warp": "(threadIdx.x >> 5)", "simd_width": "32"}
    BARRIER = "__syncthreads()"
    SHARED = "__shared__"
    SHUFFLE_DOWN = "__shfl_down_sync(0xffffffffu, {v}, {o})"
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
    KERNEL_HEAD = 'extern "C" __global__ void __launch_bounds__({block}) {name}'
    BUFFER_ARG = "{const}{type}* __restrict__ {name}"
    SCALAR_ARG_TYPES = {"bool": "unsigned char", "float16": "float"}
    HALF_LOAD = "{h2f}({buf}[{i}])"                  # half bits <-> float in software
    HALF_STORE = "{buf}[{i}] = {f2h}({v});"

    def math(self, fn, dtype):
        """CUDA's C math library: float versions carry an `f` suffix (sqrtf, fmodf...)."""
        base = super().math(fn, dtype)
        return base + "f" if dtype in ("float32", "float16") else base

    # float16 in software: buffers hold half bits; values live in floats
    def define_qc_h2f(self):
        return """// IEEE half bits -> float (exact)
static __device__ __forceinline__ float qc_h2f(unsigned short h) {
    unsigned int sign = ((unsigned int)h & 0x8000u) << 16;
    unsigned int e = ((unsigned int)h >> 10) & 0x1fu, m = (unsigned int)h & 0x3ffu;
    if (e == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (m << 13));   // inf / NaN
    if (e == 0u) {                                                             // zero / subnormal
        float v = (float)m * 5.9604644775390625e-8f;                           // m * 2^-24
        return sign ? -v : v;
    }
    return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}"""

    def define_qc_f2h(self):
        return """// float -> IEEE half bits, round to nearest even (what numpy's astype(float16) does)
static __device__ __forceinline__ unsigned short qc_f2h(float f) {
    unsigned int x = __float_as_uint(f);
    unsigned int sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);            // NaN stays NaN
    if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);           // >= 65520 rounds to inf
    unsigned int r, rem, halfway;
    if (ax < 0x38800000u) {                                                    // half subnormal or zero
        if (ax < 0x33000000u) return (unsigned short)sign;                     // below 2^-25: zero
        unsigned int shift = 126u - (ax >> 23), m = (ax & 0x7fffffu) | 0x800000u;
        r = m >> shift; rem = m & ((1u << shift) - 1u); halfway = 1u << (shift - 1u);
    } else {                                                                   // normal: rebias exponent
        unsigned int y = ax - 0x38000000u;
        r = y >> 13; rem = y & 0x1fffu; halfway = 0x1000u;
    }
    if (rem > halfway || (rem == halfway && (r & 1u))) r += 1u;                // carry may bump exponent
    return (unsigned short)(sign | r);
}"""

    def define_qc_round_f16(self):
        return (f"// float rounded to float16 precision (ties to even), kept in a float\n"
                f"{self.FUNC} float qc_round_f16(float x) {{ return {self.need('qc_h2f')}({self.need('qc_f2h')}(x)); }}")

