// What the CUDA gathers share (gather.cu, gather_nd.cu, gather_elements.cu): each output element copies the
// data element its index names, and an index out of range, which device code cannot throw, writes 0 and
// raises the kernel's error flag (device_error_flag.h); the indices must be in device memory.
//
//   gather_copy_kernel<W><<<grid_for(n), kBlock, 0, stream>>>(data, out, geometry, indices, is_int64, n, flag);
#pragma once

#include "kernels/cuda/data_movement_common.cuh"
#include "kernels/cuda/element_index.h"

namespace onnxtrain::cuda {

inline constexpr int kIndexOutOfRange = 1;

// The error flag's message for kIndexOutOfRange.
inline std::string index_status_text(int) { return "an index out of range in the indices input"; }

// Indices are data, read by every thread on the device: host memory would be a device fault.
inline void require_device_indices(const KernelSpec& spec, const TensorView& indices) {
  if (indices.numel() > 0 && on_host(indices))
    reference::kernel_fail(spec, "the indices are in host memory; the CUDA kernel reads them on the device");
}

// The data element output element `flat` copies, -1 when its index is out of range: one overload per
// gather's geometry.
ONNXTRAIN_HOST_DEVICE inline int64_t gather_copy_source(int64_t flat, const GatherGeometry& g, const void* indices,
                                                        bool indices_int64) {
  return gather_source(flat, g, indices, indices_int64);
}
ONNXTRAIN_HOST_DEVICE inline int64_t gather_copy_source(int64_t flat, const GatherNDGeometry& g, const void* indices,
                                                        bool indices_int64) {
  return gather_nd_source(flat, g, indices, indices_int64);
}
ONNXTRAIN_HOST_DEVICE inline int64_t gather_copy_source(int64_t flat, const ElementsGeometry& g, const void* indices,
                                                        bool indices_int64) {
  return gather_elements_source(flat, g, indices, indices_int64);
}

#if defined(__CUDACC__)
// out[i] = data[source of i] for the n output elements, 0 (and the flag raised) where the index is bad.
template <typename W, typename Geometry>
__global__ void gather_copy_kernel(const W* data, W* out, Geometry g, const void* indices, bool indices_int64,
                                   int64_t n, int* flag) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t source = gather_copy_source(i, g, indices, indices_int64);
    if (source < 0) {
      out[i] = W{0};
      raise_flag(flag, kIndexOutOfRange);
    } else {
      out[i] = data[source];
    }
  }
}
#endif

}  // namespace onnxtrain::cuda
