// Matrix products with one side of at most kSkinnyRows rows: a layer's weight W (N, K) against a
// micro-batch of R rows (a pipeline's micro-batches of 8, a data-parallel replica's 16, ResNet-18's layer4
// at 32x32, whose live-tap convolutions are such Gemms). oneDNN's matmul copies W into its blocked layout
// at every call (about as long as the product itself when R is 8); these read W once, in place, from
// AVX-512 registers blocked over the small side:
//   nt:  Y (R, N)  = X (R, K) · W (N, K)ᵀ  [+ bias (N)]   the forward: 8x3 dot products at a time
//   nn:  Y (R, K)  = D (R, N) · W (N, K)                   dX: 8 rows x 48 columns, W's rows streamed
//   tn:  Y (N, K)  = D (R, N)ᵀ · X (R, K)                   dW: X's R rows held in registers, one row of
//                                                           Y (48 or 16 columns) per row of D's transpose
// Row-major buffers; `add`: Y += the product instead of Y = (a sum over micro-batches). R in
// [1, kSkinnyRows]. Split over the OpenMP team by output columns (nt, nn) or rows (tn). Float32 sums in a
// fixed order per element (the result does not depend on the thread count), not oneDNN's order: results
// differ from its by rounding. Callers check has_skinny_gemm() (AVX-512) first.
#pragma once

#include <cstdint>

namespace onnxtrain::cpu {

inline constexpr int64_t kSkinnyRows = 16;

inline bool has_skinny_gemm() { return __builtin_cpu_supports("avx512f"); }

void skinny_gemm_nt(int64_t rows, int64_t n, int64_t k, const float* x, const float* w, const float* bias, float* y,
                    bool add);
void skinny_gemm_nn(int64_t rows, int64_t n, int64_t k, const float* d, const float* w, float* y, bool add);
void skinny_gemm_tn(int64_t rows, int64_t n, int64_t k, const float* d, const float* x, float* y, bool add);

}  // namespace onnxtrain::cpu
