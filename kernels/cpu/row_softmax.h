// Softmax over the last axis of float32 rows, AVX-512: per row the max, e^(x - max) written with its sum
// (Cephes' expf, as losses_norm_common.h's exp_simd), then the scaling, all while the row is in L1, a
// masked vector for the row's tail; rows split over the threads. oneDNN 2.6's jit softmax spends most of
// its time per row on rows as short as attention's (the ViT's 16640 rows of 65: 0.9-1.3 ms at one thread,
// these 0.68). The result is the same whatever the thread count. Callers check has_row_softmax() first.
//
//   if (cpu::has_row_softmax()) cpu::row_softmax(x, y, rows, n);   // y = softmax(x) over each row of n
#pragma once

#include <cstdint>

#include "kernels/cpu/elementwise_isa.h"

namespace onnxtrain::cpu {

inline bool has_row_softmax() { return elementwise::cpu_has_avx512f(); }

// y (rows, n) = softmax of each row of x (rows, n); n >= 1. y may not alias x partly (it may be x).
void row_softmax(const float* x, float* y, int64_t rows, int64_t n);

}  // namespace onnxtrain::cpu
