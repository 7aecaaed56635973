#include "kernels/cpu/row_softmax.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/cpu_common.h"

// AVX-512 by target attribute, as skinny_gemm.cc: the parallel loop calls the attributed function.
#define ONNXTRAIN_AVX512 __attribute__((target("avx512f")))

// GCC 12's AVX-512 headers pass an uninitialised "undefined" operand to some builtins and warn of it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace onnxtrain::cpu {
namespace {

// e^x of 16 floats as exp_simd computes one (losses_norm_common.h): n = round(x / ln 2) clamped to
// [-126, 127], r = x - n·ln 2 in two parts, Cephes' polynomial, 2^n from the exponent bits; 0 where e^x
// is below the normal floats (and for -inf).
ONNXTRAIN_AVX512 inline __m512 exp16(__m512 x) {
  const __m512 shifted = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(12582912.0f));
  const __m512i rounded = _mm512_sub_epi32(_mm512_castps_si512(shifted), _mm512_set1_epi32(0x4b400000));
  const __mmask16 normal = _mm512_cmpge_epi32_mask(rounded, _mm512_set1_epi32(-126));
  const __m512i n = _mm512_max_epi32(_mm512_min_epi32(rounded, _mm512_set1_epi32(127)), _mm512_set1_epi32(-126));
  const __m512 fn = _mm512_cvtepi32_ps(n);
  __m512 r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  const __m512 two_n = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
  return _mm512_maskz_mul_ps(normal, e, two_n);
}

ONNXTRAIN_AVX512 void softmax_rows(const float* x, float* y, int64_t begin, int64_t end, int64_t n) {
  const int64_t full = n / 16 * 16;
  const auto tail = static_cast<__mmask16>((1u << (n - full)) - 1);
  for (int64_t row = begin; row < end; ++row) {
    const float* xr = x + row * n;
    float* yr = y + row * n;
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < full; i += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(xr + i));
    if (tail) m = _mm512_mask_max_ps(m, tail, m, _mm512_maskz_loadu_ps(tail, xr + full));
    const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(m));
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < full; i += 16) {
      const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(xr + i), max));
      _mm512_storeu_ps(yr + i, e);
      sum = _mm512_add_ps(sum, e);
    }
    if (tail) {
      const __m512 e = _mm512_maskz_mov_ps(tail, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, xr + full), max)));
      _mm512_mask_storeu_ps(yr + full, tail, e);
      sum = _mm512_add_ps(sum, e);
    }
    const __m512 inverse = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
    for (int64_t i = 0; i < full; i += 16) _mm512_storeu_ps(yr + i, _mm512_mul_ps(_mm512_loadu_ps(yr + i), inverse));
    if (tail) _mm512_mask_storeu_ps(yr + full, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, yr + full), inverse));
  }
}

}  // namespace

void row_softmax(const float* x, float* y, int64_t rows, int64_t n) {
  parallel_for(rows, 16384 / n + 1, [&](int64_t begin, int64_t end) { softmax_rows(x, y, begin, end, n); });
}

}  // namespace onnxtrain::cpu

#pragma GCC diagnostic pop
