// What the elementwise CUDA kernels share: the generic grid-stride kernels (map over one contiguous
// input, broadcast over two or three), a Kernel made of one closure that runs on the stream's device,
// dtype dispatch over the types these kernels instantiate, and the prepare-time checks that fail naming
// the op, node and "CUDA kernel". The math itself is kernels/elementwise_functors.h's.
//
//   launch_map(stream, x, y, n, elementwise::Relu<float>{});
//   launch_broadcast2(stream, geometry, a, b, y, elementwise::Add<float>{});
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/elementwise_broadcast.h"
#include "kernels/cuda/kernel_entry.h"
#include "kernels/elementwise_functors.h"
#include "kernels/reference/elementwise_common.h"  // broadcast_sizes_or_fail, kernel_fail, checks

namespace onnxtrain::cuda {

inline constexpr unsigned int kElementwiseBlock = 256;

// y[i] = fn(x[i]) over n contiguous elements. No __restrict__ here or below: y may alias an input when
// an op runs in place, and each element is read before it is written by the same thread.
template <typename In, typename Out, typename Fn>
__global__ void map_kernel(const In* x, Out* y, int64_t n, Fn fn) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) y[i] = fn(x[i]);
}

// y[i] = fn(a[offset_a(i)], b[offset_b(i)]). `y` may alias `a` when a is laid out like y (the variadic
// fold reads and writes each element in the same thread).
template <bool Flat, typename A, typename B, typename Out, typename Fn>
__global__ void broadcast2_kernel(BroadcastGeometry g, const A* a, const B* b, Out* y, Fn fn) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < g.numel; i += step) {
    if constexpr (Flat) {
      y[i] = fn(a[i * g.strides[0][0]], b[i * g.strides[1][0]]);
    } else {
      int64_t offsets[kMaxBroadcastInputs];
      g.input_offsets(i, offsets);
      y[i] = fn(a[offsets[0]], b[offsets[1]]);
    }
  }
}

// y[i] = fn(a[...], b[...], c[...]) (Where).
template <bool Flat, typename A, typename B, typename C, typename Out, typename Fn>
__global__ void broadcast3_kernel(BroadcastGeometry g, const A* a, const B* b, const C* c, Out* y, Fn fn) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < g.numel; i += step) {
    if constexpr (Flat) {
      y[i] = fn(a[i * g.strides[0][0]], b[i * g.strides[1][0]], c[i * g.strides[2][0]]);
    } else {
      int64_t offsets[kMaxBroadcastInputs];
      g.input_offsets(i, offsets);
      y[i] = fn(a[offsets[0]], b[offsets[1]], c[offsets[2]]);
    }
  }
}

// Four consecutive elements per thread, loaded as one aligned vector (16 bytes for float32) before any is
// stored, where the operands are contiguous and aligned: the scalar loops above issue one load per element
// and ResNet-50's Relu and ReLU grad took twice PyTorch's time on an H200 (ONNXTRAIN_CUDA_PROFILE against
// torch.profiler). In place stays safe: a thread reads its four elements before it writes them.
template <typename T>
struct alignas(4 * sizeof(T)) Vec4 {
  T v[4];
};

template <typename... T>
inline constexpr bool kVectorizable = (std::is_arithmetic_v<T> && ...);

template <typename... T>
bool vec4_aligned(const T*... p) {
  return ((reinterpret_cast<uintptr_t>(p) % alignof(Vec4<T>) == 0) && ...);
}

template <typename In, typename Out, typename Fn>
__global__ void map_vec4_kernel(const In* x, Out* y, int64_t n, Fn fn) {
  const int64_t vectors = n / 4, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = first; i < vectors; i += step) {
    const Vec4<In> in = reinterpret_cast<const Vec4<In>*>(x)[i];
    Vec4<Out> out;
#pragma unroll
    for (int k = 0; k < 4; ++k) out.v[k] = fn(in.v[k]);
    reinterpret_cast<Vec4<Out>*>(y)[i] = out;
  }
  for (int64_t i = vectors * 4 + first; i < n; i += step) y[i] = fn(x[i]);  // the last n % 4
}

// y[i] = fn(a[i], b[i]): broadcast2_kernel's flat case with both inputs laid out like y.
template <typename A, typename B, typename Out, typename Fn>
__global__ void binary_vec4_kernel(const A* a, const B* b, Out* y, int64_t n, Fn fn) {
  const int64_t vectors = n / 4, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = first; i < vectors; i += step) {
    const Vec4<A> va = reinterpret_cast<const Vec4<A>*>(a)[i];
    const Vec4<B> vb = reinterpret_cast<const Vec4<B>*>(b)[i];
    Vec4<Out> out;
#pragma unroll
    for (int k = 0; k < 4; ++k) out.v[k] = fn(va.v[k], vb.v[k]);
    reinterpret_cast<Vec4<Out>*>(y)[i] = out;
  }
  for (int64_t i = vectors * 4 + first; i < n; i += step) y[i] = fn(a[i], b[i]);
}

template <typename In, typename Out, typename Fn>
void launch_map(cudaStream_t stream, const In* x, Out* y, int64_t n, Fn fn) {
  if (n == 0) return;
  if constexpr (kVectorizable<In, Out>) {
    if (n >= 4 && vec4_aligned(x, y)) {
      map_vec4_kernel<<<grid_for(n / 4, kElementwiseBlock), kElementwiseBlock, 0, stream>>>(x, y, n, fn);
      ONNXTRAIN_CUDA_CHECK_LAUNCH("map_vec4_kernel");
      return;
    }
  }
  map_kernel<<<grid_for(n, kElementwiseBlock), kElementwiseBlock, 0, stream>>>(x, y, n, fn);
  ONNXTRAIN_CUDA_CHECK_LAUNCH("map_kernel");
}

template <typename A, typename B, typename Out, typename Fn>
void launch_broadcast2(cudaStream_t stream, const BroadcastGeometry& g, const A* a, const B* b, Out* y, Fn fn) {
  if (g.numel == 0) return;
  if constexpr (kVectorizable<A, B, Out>) {
    if (g.flat() && g.strides[0][0] == 1 && g.strides[1][0] == 1 && g.numel >= 4 && vec4_aligned(a, b, y)) {
      binary_vec4_kernel<<<grid_for(g.numel / 4, kElementwiseBlock), kElementwiseBlock, 0, stream>>>(a, b, y, g.numel,
                                                                                                     fn);
      ONNXTRAIN_CUDA_CHECK_LAUNCH("binary_vec4_kernel");
      return;
    }
  }
  const unsigned int grid = grid_for(g.numel, kElementwiseBlock);
  if (g.flat()) {
    broadcast2_kernel<true><<<grid, kElementwiseBlock, 0, stream>>>(g, a, b, y, fn);
  } else {
    broadcast2_kernel<false><<<grid, kElementwiseBlock, 0, stream>>>(g, a, b, y, fn);
  }
  ONNXTRAIN_CUDA_CHECK_LAUNCH("broadcast2_kernel");
}

template <typename A, typename B, typename C, typename Out, typename Fn>
void launch_broadcast3(cudaStream_t stream, const BroadcastGeometry& g, const A* a, const B* b, const C* c, Out* y,
                       Fn fn) {
  if (g.numel == 0) return;
  const unsigned int grid = grid_for(g.numel, kElementwiseBlock);
  if (g.flat()) {
    broadcast3_kernel<true><<<grid, kElementwiseBlock, 0, stream>>>(g, a, b, c, y, fn);
  } else {
    broadcast3_kernel<false><<<grid, kElementwiseBlock, 0, stream>>>(g, a, b, c, y, fn);
  }
  ONNXTRAIN_CUDA_CHECK_LAUNCH("broadcast3_kernel");
}

// A Kernel whose run() makes the stream's device current and calls fn(cudaStream_t, inputs, outputs),
// or fn(Stream&, inputs, outputs) when the closure needs the run index (Dropout).
template <typename Fn>
class CudaClosureKernel final : public Kernel {
 public:
  explicit CudaClosureKernel(Fn fn) : fn_(std::move(fn)) {}
  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    DeviceGuard guard(stream);
    if constexpr (std::is_invocable_v<Fn&, Stream&, std::span<const TensorView>, std::span<const TensorView>>) {
      fn_(stream, inputs, outputs);
    } else {
      fn_(native_stream(stream), inputs, outputs);
    }
  }

 private:
  Fn fn_;
};

template <typename Fn>
std::unique_ptr<Kernel> make_cuda_kernel(Fn fn) {
  return std::make_unique<CudaClosureKernel<Fn>>(std::move(fn));
}

// The entry of an elementwise "cuda" kernel (kernel_entry.h), in the default domain unless `domain` is given.
inline KernelEntry cuda_entry(std::string op_type, std::vector<DType> dtypes, KernelFactory factory,
                              std::string domain = "") {
  return cuda_kernel_entry(std::move(domain), std::move(op_type), std::move(dtypes), factory);
}

// --- dtypes the elementwise CUDA kernels instantiate ---
inline const std::vector<DType> kCudaFloatDTypes = {DType::Float32, DType::Float64};
inline const std::vector<DType> kCudaNumericDTypes = {DType::Float32, DType::Float64, DType::Int32, DType::Int64};

// Calls fn(T{}) for float32/float64 (and int32/int64 with Numeric); the dtype was checked at prepare.
template <bool Numeric, typename Fn>
void dispatch_cuda(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32:
      return fn(float{});
    case DType::Float64:
      return fn(double{});
    default:
      break;
  }
  if constexpr (Numeric) {
    switch (dtype) {
      case DType::Int32:
        return fn(int32_t{});
      case DType::Int64:
        return fn(int64_t{});
      default:
        break;
    }
  }
  throw Error("elementwise CUDA kernel: dtype " + std::string(dtype_name(dtype)) + " reached run() unchecked");
}

// The dtype of input `i`, which must be present and one of `allowed`; fails naming the CUDA kernel's dtypes.
inline DType require_cuda_dtype(const KernelSpec& spec, size_t i, const std::vector<DType>& allowed) {
  const DType dtype = reference::require_input(spec, i).dtype;
  for (DType d : allowed)
    if (d == dtype) return dtype;
  std::string names;
  for (DType d : allowed) names += (names.empty() ? "" : ", ") + std::string(dtype_name(d));
  reference::kernel_fail(spec, "input " + std::to_string(i) + " has dtype " + std::string(dtype_name(dtype)) +
                                   ", the CUDA kernel supports " + names);
}

// The broadcast geometry of `ins` onto `out`, or fails (too many dims left after merging).
inline BroadcastGeometry require_geometry(const KernelSpec& spec, const std::vector<int64_t>& out,
                                          const std::vector<std::vector<int64_t>>& ins) {
  std::optional<BroadcastGeometry> g = make_broadcast_geometry(out, ins);
  if (!g) {
    reference::kernel_fail(spec, "output sizes " + reference::sizes_to_string(out) + " need more than " +
                                     std::to_string(kMaxBroadcastRank) +
                                     " dims after merging; the CUDA kernel handles up to that");
  }
  return *g;
}

// Registration of the elementwise files (each .cu file registers its own ops).
void register_cuda_unary_kernels(KernelRegistry& registry);
void register_cuda_binary_kernels(KernelRegistry& registry);
void register_cuda_compare_logic_kernels(KernelRegistry& registry);
void register_cuda_cast_kernels(KernelRegistry& registry);

}  // namespace onnxtrain::cuda
