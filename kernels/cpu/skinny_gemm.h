// Matrix products of a layer's weight W (N, K) with a micro-batch of at most kSkinnyRows rows (a pipeline's
// micro-batches of 8 against ResNet-18's layer4 at 32x32, whose live-tap convolutions are such Gemms).
// oneDNN's matmul copies W into its blocked layout at every call, about as long as the product itself at
// 8 rows; these read W once, in place, with the R rows blocked in AVX-512 registers:
//   nt:  Y (R, N) = X (R, K) · W (N, K)ᵀ [+ bias (N)]   the forward: R x 3 dot products at a time
//   nn:  Y (R, K) = D (R, N) · W (N, K)                  dX: R rows x 48 columns, W's rows prefetched
// (At 16 rows the two reads of W per product lost to oneDNN, and so did the weight gradient Dᵀ·X, which
// writes W's size and reads little: onednn_bench skinny/*.)
// Row-major buffers; `add`: Y += the product instead of Y = (a sum over micro-batches). R in
// [1, kSkinnyRows]. Split over the OpenMP team by output columns. Float32 sums in a fixed order per element
// (the result does not depend on the thread count), not oneDNN's order: results differ from its by
// rounding. Callers check has_skinny_gemm() (AVX-512) first.
#pragma once

#include <cstdint>

#include "kernels/cpu/elementwise_isa.h"

namespace onnxtrain::cpu {

inline constexpr int64_t kSkinnyRows = 8;

inline bool has_skinny_gemm() { return elementwise::cpu_has_avx512f(); }

void skinny_gemm_nt(int64_t rows, int64_t n, int64_t k, const float* x, const float* w, const float* bias, float* y,
                    bool add);
void skinny_gemm_nn(int64_t rows, int64_t n, int64_t k, const float* d, const float* w, float* y, bool add);

}  // namespace onnxtrain::cpu
