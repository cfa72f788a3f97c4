// qch_vec.h: small vector types (float4, uint2, ...) for both preludes: components x y z w,
// indexing, broadcast and per-component construction, elementwise arithmetic.
// Alignment is a parameter because CUDA and Metal lay vectors out differently.
#pragma once

#include <cstddef>

namespace qch {

template <class T, int N, size_t A>
struct vec;

#define QCH_VEC_COMMON(N)                                                              \
  using value_type = T;                                                                \
  static constexpr int size = N;                                                       \
  T& operator[](int i) { return (&x)[i]; }                                             \
  const T& operator[](int i) const { return (&x)[i]; }                                 \
  template <class U, size_t B>                                                         \
  explicit vec(const vec<U, N, B>& o) { for (int i = 0; i < N; ++i) (*this)[i] = T(o[i]); }

template <class T, size_t A>
struct alignas(A) vec<T, 2, A> {
  T x, y;
  vec() = default;
  explicit vec(T s) : x(s), y(s) {}
  vec(T a, T b) : x(a), y(b) {}
  QCH_VEC_COMMON(2)
};

template <class T, size_t A>
struct alignas(A) vec<T, 3, A> {
  T x, y, z;
  vec() = default;
  explicit vec(T s) : x(s), y(s), z(s) {}
  vec(T a, T b, T c) : x(a), y(b), z(c) {}
  QCH_VEC_COMMON(3)
};

template <class T, size_t A>
struct alignas(A) vec<T, 4, A> {
  T x, y, z, w;
  vec() = default;
  explicit vec(T s) : x(s), y(s), z(s), w(s) {}
  vec(T a, T b, T c, T d) : x(a), y(b), z(c), w(d) {}
  QCH_VEC_COMMON(4)
};
#undef QCH_VEC_COMMON

#define QCH_VEC_OP(op)                                                                 \
  template <class T, int N, size_t A>                                                  \
  vec<T, N, A> operator op(const vec<T, N, A>& a, const vec<T, N, A>& b) {             \
    vec<T, N, A> r;                                                                    \
    for (int i = 0; i < N; ++i) r[i] = T(a[i] op b[i]);                                \
    return r;                                                                          \
  }                                                                                    \
  template <class T, int N, size_t A>                                                  \
  vec<T, N, A> operator op(const vec<T, N, A>& a, T s) {                               \
    vec<T, N, A> r;                                                                    \
    for (int i = 0; i < N; ++i) r[i] = T(a[i] op s);                                   \
    return r;                                                                          \
  }
QCH_VEC_OP(+)
QCH_VEC_OP(-)
QCH_VEC_OP(*)
QCH_VEC_OP(/)
#undef QCH_VEC_OP

}  // namespace qch
