// What the CUDA data-movement kernels (data_movement_*.cu, shape_*.cu, transpose_*.cu, slice.cu,
// gather.cu, pad.cu) share: element-size dispatch (reference::dispatch_element_size: they move any
// fixed-size dtype as 1/2/4/8-byte words),
// pinned host bytes for small outputs computed on the host, the lazily checked device error flag
// (device_error_flag.h), and the per-file register functions. Prepare-time checks reuse the reference's
// (kernels/reference/copy.h) so the CUDA kernels reject exactly what the reference rejects, with the same messages.
//
//   dispatch_element_size(dtype_size(dtype), [&](auto word) { using W = decltype(word); ... });
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/device_error_flag.h"
#include "kernels/cuda/kernel_entry.h"
#include "kernels/cuda/strided_index.h"
#include "kernels/reference/copy.h"

namespace onnxtrain::cuda {

using namespace onnxtrain::cuda_index;

inline constexpr unsigned int kBlock = 256;

using reference::dispatch_element_size;

// "(2,3)", like reference::sizes_to_string, for the messages of the CUDA kernels.
inline std::string sizes_text(const std::vector<int64_t>& sizes) {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(sizes[i]);
  }
  s += ')';
  return s;
}

// Fails at prepare time for shapes the fixed-size index structs cannot hold.
inline void require_rank_at_most(const KernelSpec& spec, size_t rank, const char* what) {
  if (rank > static_cast<size_t>(kMaxRank))
    reference::kernel_fail(spec, std::string(what) + " has rank " + std::to_string(rank) +
                                     ", the CUDA kernel supports up to " + std::to_string(kMaxRank));
}

// Page-locked host bytes that a kernel copies from with cudaMemcpyAsync. Filled once at prepare time and
// never rewritten, so a copy still in flight from an earlier run always reads the right bytes; the
// kernel owns it, so it outlives every copy the kernel enqueued while the kernel lives (cudaFreeHost
// waits for the device to finish work that may use it).
class PinnedBytes {
 public:
  PinnedBytes() = default;
  explicit PinnedBytes(const void* src, size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    ONNXTRAIN_CUDA_CHECK(cudaHostAlloc(&data_, bytes, cudaHostAllocPortable));
    std::memcpy(data_, src, bytes);
  }
  ~PinnedBytes() {
    if (data_) static_cast<void>(cudaFreeHost(data_));  // a destructor cannot throw; nothing to recover
  }
  PinnedBytes(const PinnedBytes&) = delete;
  PinnedBytes& operator=(const PinnedBytes&) = delete;

  // Enqueues the copy of all bytes to `device_dst` on the stream.
  void copy_to(void* device_dst, cudaStream_t stream) const {
    if (bytes_ == 0) return;
    ONNXTRAIN_CUDA_CHECK(cudaMemcpyAsync(device_dst, data_, bytes_, cudaMemcpyHostToDevice, stream));
  }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Whether a view's data is host memory. CUDA kernels get device pointers, but an executor may keep small
// index inputs (starts, pads, Range's scalars) on the host: the kernels then read them there. Decided by
// the pointer itself (cudaPointerGetAttributes: no synchronisation), not by the view's device tag.
inline bool on_host(const TensorView& view) {
  cudaPointerAttributes attributes{};
  ONNXTRAIN_CUDA_CHECK(cudaPointerGetAttributes(&attributes, view.data));
  return attributes.type == cudaMemoryTypeUnregistered || attributes.type == cudaMemoryTypeHost;
}

// A scalar kernel argument: read on the device from `device` when it is set, else `value`.
template <typename T>
struct Scalar {
  const T* device = nullptr;
  T value{};
  static Scalar of(const TensorView& view) {
    return on_host(view) ? Scalar{nullptr, view.as<const T>()[0]} : Scalar{view.as<const T>(), T{}};
  }
#if defined(__CUDACC__)
  __device__ T get() const { return device ? *device : value; }
#endif
};

// --- per-file registration (register_cuda_data_movement_kernels in data_movement_copy.cu calls them) ---
void register_cuda_shape_constant_kernels(KernelRegistry& registry);    // shape_constant.cu
void register_cuda_copy_concat_kernels(KernelRegistry& registry);       // data_movement_copy.cu
void register_cuda_transpose_expand_kernels(KernelRegistry& registry);  // transpose_expand_tile.cu
void register_cuda_slice_kernels(KernelRegistry& registry);             // slice.cu
void register_cuda_gather_kernels(KernelRegistry& registry);            // gather.cu
void register_cuda_cumsum_kernels(KernelRegistry& registry);            // cumsum.cu
void register_cuda_trilu_kernels(KernelRegistry& registry);             // trilu.cu
void register_cuda_pad_kernels(KernelRegistry& registry);               // pad.cu
void register_cuda_gather_elements_kernels(KernelRegistry& registry);   // gather_elements.cu
void register_cuda_scatter_elements_kernels(KernelRegistry& registry);  // scatter_elements.cu
void register_cuda_gather_nd_kernels(KernelRegistry& registry);         // gather_nd.cu
void register_cuda_scatter_nd_kernels(KernelRegistry& registry);        // scatter_nd.cu
void register_cuda_top_k_kernels(KernelRegistry& registry);             // top_k.cu
void register_cuda_resize_kernels(KernelRegistry& registry);            // resize.cu

// A CUDA entry ("cuda" implementation) in the default domain or in ai.onnxtrain.
inline KernelEntry movement_entry(std::string op_type, std::vector<DType> dtypes, KernelFactory factory,
                                  std::string domain = "") {
  return cuda_kernel_entry(std::move(domain), std::move(op_type), std::move(dtypes), factory);
}

}  // namespace onnxtrain::cuda
