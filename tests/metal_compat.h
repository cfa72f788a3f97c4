// Just enough of the Metal standard library for g++ -std=c++17 to type-check generated Metal
// source (tests/test_codegen_metal.py). Address-space qualifiers become nothing; [[buffer(i)]]
// and [[thread_position_in_grid]]-style attributes are standard C++11 attribute syntax that
// g++ ignores; device functions are declared, never defined (we only compile, never run).
// It checks the generated text exactly as a Metal compiler would receive it; the execution
// harness (tests/harness/include/metal_stdlib) instead runs a rewritten copy on CPU threads.
#pragma once
#include <cmath>
#include <atomic>
#include <cstdint>

#define kernel
#define device
#define constant
#define threadgroup

namespace metal {
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;          // 64-bit, as in Metal
typedef _Float16 half;

using std::acos; using std::acosh; using std::asin; using std::asinh; using std::atan;
using std::atan2; using std::atanh; using std::ceil; using std::copysign; using std::cos;
using std::cosh; using std::exp; using std::fabs; using std::floor; using std::fmod;
using std::isinf; using std::isnan; using std::log; using std::log10; using std::log2;
using std::pow; using std::rint; using std::sin; using std::sinh; using std::sqrt;
using std::tan; using std::tanh; using std::trunc; using std::exp2;
template <class T> T min(T a, T b);
template <class T> T max(T a, T b);
using std::isfinite;

// atomics on device buffers (ops/sort.py's folded counts): int32 only, as in Metal
using atomic_int = std::atomic<int>;
using std::memory_order_relaxed;
using std::atomic_fetch_add_explicit;

enum class mem_flags { mem_none, mem_device, mem_threadgroup };
void threadgroup_barrier(mem_flags flags);

template <class T> T simd_shuffle_down(T value, ushort delta);
template <class T> T simd_shuffle_xor(T value, ushort mask);
template <class T> T simd_sum(T value);
template <class T> T simd_min(T value);
template <class T> T simd_max(T value);
template <class T> T simd_prefix_exclusive_sum(T value);
struct simd_vote { ulong bits; };
simd_vote simd_ballot(bool predicate);

template <class To, class From> To as_type(From value);

// the word vectors of wide loads and stores (querycompute/_codegen/dialects/c_vector.py)
struct uint2 { uint x, y; };
struct uint4 { uint x, y, z, w; };
struct ulong2 { ulong x, y; };
}  // namespace metal
