// CUDA TopK: one thread per element of X counts the elements of its line that come before it (larger
// for largest = 1, smaller otherwise; NaN as the largest; equal values by lower index, the reference's
// stable order) and, when that rank is below K, writes the element and its index at that rank. Every
// position gets exactly one writer, so the outputs equal the reference kernel's bit for bit. The work is
// n per element (n² per line): fine for a classifier's scores, slow for a line of 10^5. K is the
// outputs' size along the axis, which shape inference took from the K input or attribute.
#include "kernels/cuda/data_movement_common.cuh"
#include "kernels/top_k_order.h"

namespace onnxtrain::cuda {

namespace {

template <typename T>
__global__ void top_k_kernel(const T* x, T* values, int64_t* indices, int64_t total, int64_t n, int64_t inner,
                             int64_t k, bool largest) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{blockDim.x} * gridDim.x) {
    const int64_t line_size = n * inner, o = e / line_size, along = (e % line_size) / inner, in = e % inner;
    const int64_t base = o * line_size + in;
    const T mine = x[e];
    int64_t rank = 0;
    for (int64_t j = 0; j < n && rank < k; ++j)
      if (j != along && top_k_comes_before(x[base + j * inner], j, mine, along, largest)) ++rank;
    if (rank < k) {
      values[(o * k + rank) * inner + in] = mine;
      indices[(o * k + rank) * inner + in] = along;
    }
  }
}

class TopKKernel : public Kernel {
 public:
  explicit TopKKernel(const KernelSpec& spec) : spec_(spec) {
    if (spec.inputs.empty()) reference::kernel_fail(spec, "expected input X");
    if (spec.inputs.size() > 1) reference::require_index_input(spec, 1, "K");
    reference::require_output_dtype(spec, 0, spec.inputs[0].dtype);
    reference::require_output_dtype(spec, 1, DType::Int64);
    const auto rank = static_cast<int64_t>(spec.inputs[0].sizes.size());
    if (rank == 0) reference::kernel_fail(spec, "X must have rank >= 1, got a scalar");
    axis_ = reference::normalized_axis(spec, spec.attributes.get_int("axis", -1), rank);
    largest_ = spec.attributes.get_int("largest", 1) != 0;
    if (!reference::dispatch_numeric(spec.inputs[0].dtype, [](auto) {}))
      reference::kernel_fail(spec, "unsupported dtype " + std::string(dtype_name(spec.inputs[0].dtype)));
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView& x = inputs[0];
    const int64_t total = x.numel(), n = x.sizes[axis_], k = outputs[0].sizes.at(axis_);
    if (k > n)
      reference::kernel_fail(spec_, "K " + std::to_string(k) + " is more than the " + std::to_string(n) +
                                        " elements along axis " + std::to_string(axis_));
    if (total == 0 || k == 0) return;
    int64_t inner = 1;
    for (size_t d = static_cast<size_t>(axis_) + 1; d < x.sizes.size(); ++d) inner *= x.sizes[d];
    DeviceGuard guard(stream);
    reference::dispatch_numeric(x.dtype, [&](auto zero) {
      using T = decltype(zero);
      top_k_kernel<T><<<grid_for(total), kBlock, 0, native_stream(stream)>>>(
          x.as<const T>(), outputs[0].as<T>(), outputs[1].as<int64_t>(), total, n, inner, k, largest_);
      ONNXTRAIN_CUDA_CHECK_LAUNCH((top_k_kernel<T>));
    });
  }

 private:
  KernelSpec spec_;
  int64_t axis_ = 0;
  bool largest_ = true;
};

}  // namespace

void register_cuda_top_k_kernels(KernelRegistry& registry) {
  registry.add(movement_entry("TopK", {DType::Float32, DType::Float64, DType::Int32, DType::Int64},
                              &reference::make_kernel<TopKKernel>));
}

}  // namespace onnxtrain::cuda
