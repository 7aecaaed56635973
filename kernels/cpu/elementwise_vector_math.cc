// libmvec wrappers of elementwise_vector_math.h. A tail shorter than a vector is padded with 1.0f (in
// every function's domain) and goes through the same vector call, so no element takes a different path.
#include "kernels/cpu/elementwise_vector_math.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/elementwise_isa.h"

#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define ONNXTRAIN_LIBMVEC 1
#include <immintrin.h>
// map_lanes<__m256> is always inlined into the AVX2 functions; GCC still notes the ABI of its template.
#pragma GCC diagnostic ignored "-Wpsabi"
#else
#define ONNXTRAIN_LIBMVEC 0
#endif

namespace onnxtrain::cpu::elementwise {

#if ONNXTRAIN_LIBMVEC

extern "C" {
__m128 _ZGVbN4v_expf(__m128);
__m128 _ZGVbN4v_logf(__m128);
__m128 _ZGVbN4v_erff(__m128);
__m128 _ZGVbN4v_expm1f(__m128);
__m128 _ZGVbN4vv_powf(__m128, __m128);
}

namespace {

// y = f(x, b) over n elements, W lanes of vector type V at a time; Load/Store move W floats.
template <typename V, int W, typename F>
__attribute__((always_inline)) inline void map_lanes(const float* a, bool ca, const float* b, bool cb, float* y,
                                                     int64_t n, F f) {
  alignas(64) float pa[W] = {}, pb[W] = {};
  if (!ca) std::fill(pa, pa + W, *a);
  if (!cb) std::fill(pb, pb + W, *b);
  V va, vb;
  std::memcpy(&va, pa, sizeof(V));
  std::memcpy(&vb, pb, sizeof(V));
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    if (ca) std::memcpy(&va, a + i, sizeof(V));
    if (cb) std::memcpy(&vb, b + i, sizeof(V));
    const V r = f(va, vb);
    std::memcpy(y + i, &r, sizeof(V));
  }
  if (i == n) return;
  const int64_t rest = n - i;
  if (ca) {
    std::fill(pa, pa + W, 1.0f);
    std::memcpy(pa, a + i, static_cast<size_t>(rest) * sizeof(float));
    std::memcpy(&va, pa, sizeof(V));
  }
  if (cb) {
    std::fill(pb, pb + W, 1.0f);
    std::memcpy(pb, b + i, static_cast<size_t>(rest) * sizeof(float));
    std::memcpy(&vb, pb, sizeof(V));
  }
  const V r = f(va, vb);
  alignas(64) float out[W];
  std::memcpy(out, &r, sizeof(V));
  std::memcpy(y + i, out, static_cast<size_t>(rest) * sizeof(float));
}

}  // namespace

// The functors call one libmvec variant each; AVX2 ones are compiled for AVX2 (ymm arguments), with the
// loops that call them, and used only where the CPU has it.
#define ONNXTRAIN_UNARY_FUNCTOR(Name, V, f)     \
  struct Name {                                 \
    V operator()(V v, V) const { return f(v); } \
  };
#define ONNXTRAIN_BINARY_FUNCTOR(Name, V, f)         \
  struct Name {                                      \
    V operator()(V u, V v) const { return f(u, v); } \
  };

namespace {
ONNXTRAIN_UNARY_FUNCTOR(Exp4, __m128, _ZGVbN4v_expf)
ONNXTRAIN_UNARY_FUNCTOR(Log4, __m128, _ZGVbN4v_logf)
ONNXTRAIN_UNARY_FUNCTOR(Erf4, __m128, _ZGVbN4v_erff)
ONNXTRAIN_UNARY_FUNCTOR(Expm14, __m128, _ZGVbN4v_expm1f)
ONNXTRAIN_BINARY_FUNCTOR(Pow4, __m128, _ZGVbN4vv_powf)
}  // namespace

#pragma GCC push_options
#pragma GCC target("avx2")
extern "C" {
__m256 _ZGVdN8v_expf(__m256);
__m256 _ZGVdN8v_logf(__m256);
__m256 _ZGVdN8v_erff(__m256);
__m256 _ZGVdN8v_expm1f(__m256);
__m256 _ZGVdN8vv_powf(__m256, __m256);
}
namespace {
ONNXTRAIN_UNARY_FUNCTOR(Exp8, __m256, _ZGVdN8v_expf)
ONNXTRAIN_UNARY_FUNCTOR(Log8, __m256, _ZGVdN8v_logf)
ONNXTRAIN_UNARY_FUNCTOR(Erf8, __m256, _ZGVdN8v_erff)
ONNXTRAIN_UNARY_FUNCTOR(Expm18, __m256, _ZGVdN8v_expm1f)
ONNXTRAIN_BINARY_FUNCTOR(Pow8, __m256, _ZGVdN8vv_powf)

template <typename F>
void map8(const float* a, bool ca, const float* b, bool cb, float* y, int64_t n) {
  map_lanes<__m256, 8>(a, ca, b, cb, y, n, F{});
}
}  // namespace
#pragma GCC pop_options

namespace {
template <typename F4, typename F8>
void map(const float* a, bool ca, const float* b, bool cb, float* y, int64_t n) {
  if (use_avx2) return map8<F8>(a, ca, b, cb, y, n);
  map_lanes<__m128, 4>(a, ca, b, cb, y, n, F4{});
}
}  // namespace

void vector_exp(const float* x, float* y, int64_t n) { map<Exp4, Exp8>(x, true, x, true, y, n); }
void vector_log(const float* x, float* y, int64_t n) { map<Log4, Log8>(x, true, x, true, y, n); }
void vector_erf(const float* x, float* y, int64_t n) { map<Erf4, Erf8>(x, true, x, true, y, n); }
void vector_expm1(const float* x, float* y, int64_t n) { map<Expm14, Expm18>(x, true, x, true, y, n); }
void vector_pow(const float* a, bool ca, const float* b, bool cb, float* y, int64_t n) {
  map<Pow4, Pow8>(a, ca, b, cb, y, n);
}

#else  // no libmvec: the scalar libm calls

void vector_exp(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}
void vector_log(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::log(x[i]);
}
void vector_erf(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::erf(x[i]);
}
void vector_expm1(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::expm1(x[i]);
}
void vector_pow(const float* a, bool ca, const float* b, bool cb, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::pow(a[ca ? i : 0], b[cb ? i : 0]);
}

#endif

}  // namespace onnxtrain::cpu::elementwise
