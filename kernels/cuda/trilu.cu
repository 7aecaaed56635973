// CUDA Trilu: one thread per element keeps it when it lies in the triangle (upper: j - i >= k; lower:
// j - i <= k) and writes zero otherwise. k (the optional scalar input) is read on the device, or on the
// host when the executor keeps it there. Elements move as 1/2/4/8-byte words.
#include "kernels/cuda/data_movement_common.cuh"

namespace onnxtrain::cuda {

namespace {

template <typename W, typename I>
__global__ void trilu_kernel(const W* x, W* y, int64_t total, int64_t rows, int64_t cols, Scalar<I> k_scalar,
                             bool has_k, bool upper) {
  const int64_t k = has_k ? static_cast<int64_t>(k_scalar.get()) : 0;
  for (int64_t at = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; at < total; at += int64_t{blockDim.x} * gridDim.x) {
    const int64_t i = at / cols % rows, j = at % cols;
    const bool kept = upper ? j - i >= k : j - i <= k;
    y[at] = kept ? x[at] : W{};
  }
}

class TriluKernel : public Kernel {
 public:
  explicit TriluKernel(const KernelSpec& spec) {
    reference::require_input_count(spec, 1, 2);
    has_k_ = reference::has_input(spec, 1);
    if (has_k_) {
      reference::require_index_input(spec, 1, "k");
      if (spec.inputs[1].numel() != 1)
        reference::kernel_fail(spec, "k must be a scalar, got sizes " + sizes_text(spec.inputs[1].sizes));
    }
    reference::require_output(spec, 0, spec.inputs[0].dtype, spec.inputs[0].sizes);
    if (spec.inputs[0].sizes.size() < 2)
      reference::kernel_fail(spec, "x must have rank >= 2, got sizes " + sizes_text(spec.inputs[0].sizes));
    if (!dispatch_element_size(dtype_size(spec.inputs[0].dtype), [](auto) {}))
      reference::kernel_fail(spec, "unsupported dtype " + std::string(dtype_name(spec.inputs[0].dtype)));
    upper_ = spec.attributes.get_int("upper", 1) != 0;
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const int64_t total = inputs[0].numel();
    if (total == 0) return;
    DeviceGuard guard(stream);
    const size_t rank = inputs[0].sizes.size();
    const int64_t rows = inputs[0].sizes[rank - 2], cols = inputs[0].sizes[rank - 1];
    dispatch_element_size(dtype_size(inputs[0].dtype), [&](auto word) {
      using W = decltype(word);
      auto launch = [&](auto index) {
        using I = decltype(index);
        const Scalar<I> k = has_k_ ? Scalar<I>::of(inputs[1]) : Scalar<I>{};
        trilu_kernel<W, I><<<grid_for(total), kBlock, 0, native_stream(stream)>>>(
            inputs[0].as<const W>(), outputs[0].as<W>(), total, rows, cols, k, has_k_, upper_);
        ONNXTRAIN_CUDA_CHECK_LAUNCH((trilu_kernel<W, I>));
      };
      if (has_k_ && inputs[1].dtype == DType::Int32)
        launch(int32_t{});
      else
        launch(int64_t{});
    });
  }

 private:
  bool has_k_ = false, upper_ = true;
};

}  // namespace

void register_cuda_trilu_kernels(KernelRegistry& registry) {
  registry.add(movement_entry("Trilu", reference::with_bool(reference::kArithmeticDTypes),
                              &reference::make_kernel<TriluKernel>));
}

}  // namespace onnxtrain::cuda
