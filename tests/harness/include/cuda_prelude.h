// cuda_prelude.h: compiles CUDA C kernels as C++ for the CPU harness (tests/harness/runner.py).
//
// Models, on top of qch_runtime.h (read its header comment for the device behaviours that are
// and are not modelled): threadIdx/blockIdx/blockDim/gridDim, warpSize = 32, __syncthreads,
// __syncwarp, the *_sync warp intrinsics (shfl, shfl_up/down/xor with `width`, ballot, any,
// all, reduce_*), bit intrinsics, the _rn arithmetic intrinsics, atomics, vector types.
// `__shared__` declarations inside kernels are rewritten by the runner into references into
// the per-block arena (qch::shared_object), because C++ has no block-scoped storage.
// Not modelled: __constant__ memory as a separate space (it is ordinary global data here),
// textures, cooperative groups, clock(), dynamic parallelism, and lock-step warp execution.
#pragma once

#include "qch_runtime.h"
#include "qch_vec.h"

static_assert(qch::kWarp == 32, "CUDA warps are 32 lanes (and its masks 32 bits): build CUDA "
              "sources without QCH_SIMD_WIDTH");

// ---- qualifiers --------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __constant__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

// ---- thread coordinates ------------------------------------------------------------------
struct dim3 { unsigned int x, y, z; };
namespace qch {
struct coord3 { unsigned int x, y, z; };  // threadIdx / blockIdx (uint3 in CUDA)
inline coord3 u3(Dim3 d) { return coord3{d.x, d.y, d.z}; }
inline dim3 d3(Dim3 d) { return dim3{d.x, d.y, d.z}; }
}
#define threadIdx (::qch::u3(::qch::t.tid))
#define blockIdx (::qch::u3(::qch::t.bid))
#define blockDim (::qch::d3(::qch::t.bdim))
#define gridDim (::qch::d3(::qch::t.gdim))
#define warpSize 32

// ---- barriers and fences -----------------------------------------------------------------
inline void __syncthreads() { qch::block_barrier(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  uint64_t raw[qch::kWarp][2];
  qch::rendezvous("__syncwarp", mask, 0, 0, raw);
}
inline unsigned __activemask() { return qch::my_warp().live; }

// ---- warp shuffles: segments of `width` lanes, out-of-segment sources keep the own value ----
namespace qch {
inline int seg_base(int width) { return int(lane()) / width * width; }
}
template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  int s = qch::seg_base(width) + (src % width + width) % width;
  return qch::shuffle_from("__shfl_sync", mask, v, s);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  int l = int(qch::lane()), s = l + int(delta);
  bool inside = s < qch::seg_base(width) + width;
  return qch::shuffle_from("__shfl_down_sync", mask, v, inside ? s : l);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  int l = int(qch::lane()), s = l - int(delta);
  bool inside = s >= qch::seg_base(width);
  return qch::shuffle_from("__shfl_up_sync", mask, v, inside ? s : l);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  int l = int(qch::lane()), s = l ^ lane_mask;
  bool inside = s >= qch::seg_base(width) && s < qch::seg_base(width) + width;
  return qch::shuffle_from("__shfl_xor_sync", mask, v, inside ? s : l);
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  int all[qch::kWarp];
  unsigned parts = qch::gather("__ballot_sync", mask, pred, all);
  unsigned r = 0;
  for (unsigned i = 0; i < qch::kWarp; ++i)
    if ((parts >> i & 1) && all[i]) r |= 1u << i;
  return r;
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) {
  int all[qch::kWarp];
  unsigned parts = qch::gather("__all_sync", mask, pred, all);
  for (unsigned i = 0; i < qch::kWarp; ++i)
    if ((parts >> i & 1) && !all[i]) return 0;
  return 1;
}
namespace qch {
template <class T, class F>
inline T warp_reduce(const char* op, unsigned mask, T v, F f) {
  T all[kWarp];
  unsigned parts = gather(op, mask, v, all);
  bool first = true;
  T acc{};
  for (unsigned i = 0; i < kWarp; ++i)
    if (parts >> i & 1) { acc = first ? all[i] : f(acc, all[i]); first = false; }
  return acc;
}
}
#define QCH_REDUCE_SYNC(name, T, expr) \
  inline T name(unsigned mask, T v) { return qch::warp_reduce<T>(#name, mask, v, [](T a, T b) { return T(expr); }); }
QCH_REDUCE_SYNC(__reduce_add_sync, unsigned, a + b)
QCH_REDUCE_SYNC(__reduce_add_sync, int, unsigned(a) + unsigned(b))
QCH_REDUCE_SYNC(__reduce_min_sync, unsigned, a < b ? a : b)
QCH_REDUCE_SYNC(__reduce_min_sync, int, a < b ? a : b)
QCH_REDUCE_SYNC(__reduce_max_sync, unsigned, a > b ? a : b)
QCH_REDUCE_SYNC(__reduce_max_sync, int, a > b ? a : b)
QCH_REDUCE_SYNC(__reduce_and_sync, unsigned, a & b)
QCH_REDUCE_SYNC(__reduce_or_sync, unsigned, a | b)
QCH_REDUCE_SYNC(__reduce_xor_sync, unsigned, a ^ b)
#undef QCH_REDUCE_SYNC

// ---- bit intrinsics and reinterpretation ---------------------------------------------------
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz(unsigned(x)) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
namespace qch {
template <class To, class From>
inline To bit_cast(From f) { static_assert(sizeof(To) == sizeof(From)); To r; std::memcpy(&r, &f, sizeof r); return r; }
}
inline int __float_as_int(float x) { return qch::bit_cast<int>(x); }
inline unsigned __float_as_uint(float x) { return qch::bit_cast<unsigned>(x); }
inline float __int_as_float(int x) { return qch::bit_cast<float>(x); }
inline float __uint_as_float(unsigned x) { return qch::bit_cast<float>(x); }
inline long long __double_as_longlong(double x) { return qch::bit_cast<long long>(x); }
inline double __longlong_as_double(long long x) { return qch::bit_cast<double>(x); }

// Round-to-nearest arithmetic: what the host does anyway without contraction.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }

// The PTX conversions the printer writes as inline asm (the runner rewrites each
// `asm("cvt.<op> %0, %1;" ...)` into a call of ::qch::cvt_<op>): _Float16 converts with IEEE
// round to nearest even, as cvt.rn does. NaN keeps the host's quiet NaN (the GPU gives 0x7fff).
namespace qch {
inline float cvt_f32_f16(unsigned short h) { return float(bit_cast<_Float16>(h)); }
inline unsigned short cvt_rn_f16_f32(float f) { return bit_cast<unsigned short>(_Float16(f)); }
// cvt.u16.u32: the low 16 bits (the CUDA printer's 16-bit negation, dialects/cuda.py)
inline unsigned short cvt_u16_u32(unsigned int v) { return (unsigned short)(v & 0xFFFFu); }
}

template <class T>
inline T __ldg(const T* p) { return *p; }

// CUDA's integer min/max overloads (floats use fminf/fmaxf from math.h).
template <class T, class = std::enable_if_t<std::is_integral_v<T>>>
inline T min(T a, T b) { return a < b ? a : b; }
template <class T, class = std::enable_if_t<std::is_integral_v<T>>>
inline T max(T a, T b) { return a > b ? a : b; }

// ---- atomics: real atomics on the host buffers --------------------------------------------
namespace qch {
template <class T>
inline std::atomic_ref<T> ref(T* p) { return std::atomic_ref<T>(*p); }
template <class T, class F>
inline T atomic_update(T* p, F f) {
  auto r = ref(p);
  T old = r.load();
  while (!r.compare_exchange_weak(old, f(old))) {}
  return old;
}
}
template <class T> inline T atomicAdd(T* p, T v) {
  if constexpr (std::is_integral_v<T>) return qch::ref(p).fetch_add(v);
  else return qch::atomic_update(p, [v](T o) { return T(o + v); });
}
template <class T> inline T atomicSub(T* p, T v) { return qch::ref(p).fetch_sub(v); }
template <class T> inline T atomicExch(T* p, T v) { return qch::ref(p).exchange(v); }
template <class T> inline T atomicMin(T* p, T v) { return qch::atomic_update(p, [v](T o) { return v < o ? v : o; }); }
template <class T> inline T atomicMax(T* p, T v) { return qch::atomic_update(p, [v](T o) { return v > o ? v : o; }); }
template <class T> inline T atomicAnd(T* p, T v) { return qch::ref(p).fetch_and(v); }
template <class T> inline T atomicOr(T* p, T v) { return qch::ref(p).fetch_or(v); }
template <class T> inline T atomicXor(T* p, T v) { return qch::ref(p).fetch_xor(v); }
template <class T> inline T atomicCAS(T* p, T cmp, T v) {
  qch::ref(p).compare_exchange_strong(cmp, v);
  return cmp;
}
inline unsigned atomicInc(unsigned* p, unsigned limit) {
  return qch::atomic_update(p, [limit](unsigned o) { return o >= limit ? 0u : o + 1; });
}

// ---- vector types ------------------------------------------------------------------------
#define QCH_CUDA_VEC(name, T)                                                                 \
  using name##2 = qch::vec<T, 2, 2 * sizeof(T)>;                                              \
  using name##3 = qch::vec<T, 3, alignof(T)>;                                                 \
  using name##4 = qch::vec<T, 4, (4 * sizeof(T) < 16 ? 4 * sizeof(T) : 16)>;                  \
  inline name##2 make_##name##2(T a, T b) { return name##2(a, b); }                            \
  inline name##3 make_##name##3(T a, T b, T c) { return name##3(a, b, c); }                    \
  inline name##4 make_##name##4(T a, T b, T c, T d) { return name##4(a, b, c, d); }
QCH_CUDA_VEC(char, signed char)
QCH_CUDA_VEC(uchar, unsigned char)
QCH_CUDA_VEC(short, short)
QCH_CUDA_VEC(ushort, unsigned short)
QCH_CUDA_VEC(int, int)
QCH_CUDA_VEC(uint, unsigned int)
QCH_CUDA_VEC(longlong, long long)
QCH_CUDA_VEC(ulonglong, unsigned long long)
QCH_CUDA_VEC(float, float)
QCH_CUDA_VEC(double, double)
#undef QCH_CUDA_VEC
