// What GatherNDGrad (gather_nd.cu) and ScatterND (scatter_nd.cu) share: a deterministic scatter of slices
// without atomics. One warp per output slice r = (batch, row) sets it from `init` (zeros when null), then
// scans the batch's index rows 32 at a time; a ballot marks those naming `row`, and for each of them in
// increasing order the lanes fold its `source` slice in with `combine` (lane l owning elements l, l + 32,
// ...). So repeated rows combine in the reference's order and the result equals it bit for bit. The warp
// of row 0 of each batch raises kIndexOutOfRange for a bad coordinate.
//
//   nd_slice_fold_kernel<T><<<grid_for(slices * kWarp), kBlock, 0, stream>>>(init, source, out, geometry,
//                                                                             indices, is_int64, slices, combine,
//                                                                             flag);
#pragma once

#include "kernels/cuda/indexed_copy.cuh"
#include "kernels/reference/elements_index.h"
#include "kernels/reference/gather_nd_index.h"

namespace onnxtrain::cuda {

// The device geometry of a GatherND layout; fails when k exceeds the kernels' rank limit (gather_nd.cu).
GatherNDGeometry gather_nd_geometry(const KernelSpec& spec, const reference::GatherNDLayout& l);

constexpr int kWarp = 32;
static_assert(kBlock % kWarp == 0, "nd_slice_fold_kernel needs whole warps per block");

// An element and an update under a scatter's reduction (the update itself for None), as
// reference::scatter_combine.
struct ScatterCombine {
  reference::ScatterReduction reduction;
  template <typename T>
  ONNXTRAIN_HOST_DEVICE T operator()(T a, T b) const {
    switch (reduction) {
      case reference::ScatterReduction::Add:
        return static_cast<T>(a + b);
      case reference::ScatterReduction::Mul:
        return static_cast<T>(a * b);
      case reference::ScatterReduction::Max:
        return a < b ? b : a;
      case reference::ScatterReduction::Min:
        return b < a ? b : a;
      case reference::ScatterReduction::None:
        break;
    }
    return b;
  }
};

#if defined(__CUDACC__)
template <typename T, typename Combine>
__global__ void nd_slice_fold_kernel(const T* init, const T* source, T* out, GatherNDGeometry g, const void* indices,
                                     bool indices_int64, int64_t slices, Combine combine, int* flag) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / kWarp;
  // r is the same for every lane of a warp (blockDim is a multiple of 32), so the ballots see all 32 lanes.
  for (int64_t r = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarp; r < slices; r += warps) {
    const int64_t batch = r / g.rows, row = r % g.rows;
    T* slice = out + r * g.inner;
    for (int64_t k = lane; k < g.inner; k += kWarp) slice[k] = init ? init[r * g.inner + k] : T(0);
    for (int64_t base = 0; base < g.count; base += kWarp) {
      const int64_t j = base + lane;
      const int64_t named = j < g.count ? gather_nd_row(batch * g.count + j, g, indices, indices_int64) : -2;
      if (row == 0 && named == -1) raise_flag(flag, kIndexOutOfRange);
      unsigned int mask = __ballot_sync(0xffffffffu, named == row);
      while (mask != 0) {
        const T* from = source + (batch * g.count + base + __ffs(static_cast<int>(mask)) - 1) * g.inner;
        mask &= mask - 1;
        for (int64_t k = lane; k < g.inner; k += kWarp) slice[k] = combine(slice[k], from[k]);
      }
    }
  }
}
#endif

}  // namespace onnxtrain::cuda
