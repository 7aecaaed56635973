#include "kernels/cpu/skinny_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <utility>

#include "kernels/cpu/cpu_common.h"

// AVX-512 by target attribute, not by compiling this file with -mavx512f: inline functions this file
// instantiates (std::, parallel_for) would then be AVX-512 copies the linker may pick for every caller.
// A lambda does not inherit its function's target, so the parallel loops call the attributed functions.
#define ONNXTRAIN_AVX512 __attribute__((target("avx512f")))

// GCC 12's AVX-512 headers pass an uninitialised "undefined" operand to some builtins and warn of it
// (pushed and popped: the unity build compiles the next file in the same unit).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace onnxtrain::cpu {
namespace {

constexpr int64_t kLanes = 16;
constexpr int64_t kPrefetchRows = 16;  // nn: how many rows of W ahead to prefetch

ONNXTRAIN_AVX512 inline __mmask16 lanes_below(int64_t count) {
  return static_cast<__mmask16>(count >= kLanes ? 0xFFFF : (1u << count) - 1);
}

// The sum of v's lanes (GCC 12's _mm512_reduce_add_ps warns of an uninitialised value in its header).
ONNXTRAIN_AVX512 inline float lane_sum(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  __m128 x = _mm512_castps512_ps128(v);
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}

// nt: Y[r][j] for R rows and the NB rows j of W from `j0`: dot products over K, 16 lanes at a time.
template <int R, int NB>
ONNXTRAIN_AVX512 void nt_tile(int64_t k, const float* x, const float* w, int64_t j0, int64_t n, const float* bias,
                              float* y, bool add) {
  __m512 acc[R][NB];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int b = 0; b < NB; ++b) acc[r][b] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < k; kk += kLanes) {
    const __mmask16 m = lanes_below(k - kk);
    __m512 wv[NB];
#pragma GCC unroll 16
    for (int b = 0; b < NB; ++b) wv[b] = _mm512_maskz_loadu_ps(m, w + (j0 + b) * k + kk);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + r * k + kk);
#pragma GCC unroll 16
      for (int b = 0; b < NB; ++b) acc[r][b] = _mm512_fmadd_ps(xv, wv[b], acc[r][b]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int b = 0; b < NB; ++b) {
      float v = lane_sum(acc[r][b]);
      if (bias) v += bias[j0 + b];
      float& out = y[r * n + j0 + b];
      out = add ? out + v : v;
    }
  }
}

template <int R>
ONNXTRAIN_AVX512 void nt_rows(int64_t k, const float* x, const float* w, int64_t n, const float* bias, float* y,
                              bool add, int64_t begin, int64_t end) {
  int64_t j = begin;
  for (; j + 3 <= end; j += 3) nt_tile<R, 3>(k, x, w, j, n, bias, y, add);
  if (end - j == 2) nt_tile<R, 2>(k, x, w, j, n, bias, y, add);
  if (end - j == 1) nt_tile<R, 1>(k, x, w, j, n, bias, y, add);
}

// nn: Y[r][c..c+16·CV) over R rows = Σ_j D[r][j] · W[j][c..): W's row pieces streamed, D broadcast.
template <int R, int CV>
ONNXTRAIN_AVX512 void nn_tile(int64_t n, int64_t k, const float* d, const float* w, int64_t c, float* y, bool add) {
  __m512 acc[R][CV];
  __mmask16 m[CV];
#pragma GCC unroll 16
  for (int v = 0; v < CV; ++v) m[v] = lanes_below(k - c - v * kLanes);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < CV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    // W is walked down a column strip, a row (often a page) apart: too far for the hardware prefetcher.
    if (j + kPrefetchRows < n) {
#pragma GCC unroll 4
      for (int v = 0; v < CV; ++v)
        _mm_prefetch(reinterpret_cast<const char*>(w + (j + kPrefetchRows) * k + c + v * kLanes), _MM_HINT_T0);
    }
    __m512 wv[CV];
#pragma GCC unroll 16
    for (int v = 0; v < CV; ++v) wv[v] = _mm512_maskz_loadu_ps(m[v], w + j * k + c + v * kLanes);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 dv = _mm512_set1_ps(d[r * n + j]);
#pragma GCC unroll 16
      for (int v = 0; v < CV; ++v) acc[r][v] = _mm512_fmadd_ps(dv, wv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int v = 0; v < CV; ++v) {
      float* out = y + r * k + c + v * kLanes;
      const __m512 sum = add ? _mm512_add_ps(acc[r][v], _mm512_maskz_loadu_ps(m[v], out)) : acc[r][v];
      _mm512_mask_storeu_ps(out, m[v], sum);
    }
  }
}

template <int R>
ONNXTRAIN_AVX512 void nn_columns(int64_t n, int64_t k, const float* d, const float* w, float* y, bool add,
                                 int64_t begin, int64_t end) {  // in blocks of 48 columns
  for (int64_t b = begin; b < end; ++b) {
    const int64_t c = b * 3 * kLanes;
    const int64_t left = k - c;
    if (left > 2 * kLanes) {
      nn_tile<R, 3>(n, k, d, w, c, y, add);
    } else if (left > kLanes) {
      nn_tile<R, 2>(n, k, d, w, c, y, add);
    } else {
      nn_tile<R, 1>(n, k, d, w, c, y, add);
    }
  }
}

// fn.template operator()<R>() for R = rows, one instantiation per R in [1, Max]. (A generic lambda does not
// inherit the AVX-512 target; it only calls the attributed functions.)
template <int Max, int R = 1, typename Fn>
void with_rows(int64_t rows, Fn&& fn) {
  if constexpr (R <= Max) {
    if (rows == R) return fn.template operator()<R>();
    with_rows<Max, R + 1>(rows, std::forward<Fn>(fn));
  }
}

}  // namespace

void skinny_gemm_nt(int64_t rows, int64_t n, int64_t k, const float* x, const float* w, const float* bias, float* y,
                    bool add) {
  // Threads over W's rows (Y's columns), in whole tiles of 3: each thread reads its rows of W once.
  parallel_for((n + 2) / 3, 16, [&](int64_t begin, int64_t end) {
    with_rows<kSkinnyRows>(rows,
                           [&]<int R>() { nt_rows<R>(k, x, w, n, bias, y, add, begin * 3, std::min(end * 3, n)); });
  });
}

void skinny_gemm_nn(int64_t rows, int64_t n, int64_t k, const float* d, const float* w, float* y, bool add) {
  // Threads over blocks of 48 of Y's columns: each thread reads its column strip of W once.
  const int64_t blocks = (k + 3 * kLanes - 1) / (3 * kLanes);
  parallel_for(blocks, 4, [&](int64_t begin, int64_t end) {
    with_rows<kSkinnyRows>(rows, [&]<int R>() { nn_columns<R>(n, k, d, w, y, add, begin, end); });
  });
}

}  // namespace onnxtrain::cpu

#pragma GCC diagnostic pop
#undef ONNXTRAIN_AVX512
