// Cooperative reductions of a group of G threads (G = 32: one warp, G = 256: the whole block of 256;
// G = 1 a thread alone) that
// the CUDA reduction, softmax, loss and normalisation kernels share. Every thread of the group gets the
// result. Reductions combine in a fixed order, so results are deterministic run to run.
//
//   __shared__ double scratch[kReduceWarps];
//   const double total = group_reduce<256>(partial, [](double a, double b) { return a + b; }, scratch);
#pragma once

#include <cuda_runtime.h>

namespace onnxtrain::cuda {

inline constexpr int kReduceBlock = 256;
inline constexpr int kReduceWarps = kReduceBlock / 32;
inline constexpr long long kMaxGridBlocks = 65535LL * 16;

// Blocks for a grid-stride loop over `blocks` units of work (at least 1, at most kMaxGridBlocks).
inline unsigned int grid_blocks(long long blocks) {
  if (blocks < 1) return 1;
  return static_cast<unsigned int>(blocks > kMaxGridBlocks ? kMaxGridBlocks : blocks);
}

template <int G, typename V, typename Combine>
__device__ __forceinline__ V group_reduce(V v, Combine combine, V* shared) {
  static_assert(G == 1 || G == 32 || G == kReduceBlock, "a group is one thread, one warp or one whole block");
  if constexpr (G == 1) {
    return v;
  } else {
    for (int offset = 16; offset > 0; offset >>= 1) v = combine(v, __shfl_down_sync(0xffffffffu, v, offset));
    if constexpr (G == 32) {
      return __shfl_sync(0xffffffffu, v, 0);
    } else {
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
      __syncthreads();  // the previous call's readers are done with `shared`
      if (lane == 0) shared[warp] = v;
      __syncthreads();
      V total = shared[0];
      for (int w = 1; w < kReduceWarps; ++w) total = combine(total, shared[w]);
      return total;
    }
  }
}

template <int G>
__device__ __forceinline__ double group_sum(double v, double* shared) {
  return group_reduce<G>(
      v, [](double a, double b) { return a + b; }, shared);
}

template <int G>
__device__ __forceinline__ double group_max(double v, double* shared) {
  return group_reduce<G>(
      v, [](double a, double b) { return fmax(a, b); }, shared);
}

}  // namespace onnxtrain::cuda
