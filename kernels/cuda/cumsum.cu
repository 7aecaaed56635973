// CUDA CumSum: one thread per line along the axis walks it in order, so every sum accumulates in the
// reference's order (bit-identical results). The axis scalar is read on the device (or on the host when
// the executor keeps it there) and the line geometry is computed from it, so nothing waits on the host.
// An axis out of range leaves the output unwritten and raises the device error flag, which the kernel's
// next run() reports (device_error_flag.h), like the gather kernels' bad indices.
#include "kernels/cuda/data_movement_common.cuh"

namespace onnxtrain::cuda {

namespace {

struct Sizes {
  int64_t values[kMaxRank] = {};
  int rank = 0;
};

template <typename T, typename I>
__global__ void cumsum_kernel(const T* x, T* y, Sizes sizes, Scalar<I> axis_scalar, int64_t total, bool exclusive,
                              bool reverse, int* error_flag) {
  int64_t axis = static_cast<int64_t>(axis_scalar.get());
  if (axis < 0) axis += sizes.rank;
  if (axis < 0 || axis >= sizes.rank) {
    raise_flag(error_flag, 1);
    return;
  }
  int64_t inner = 1;
  for (int d = static_cast<int>(axis) + 1; d < sizes.rank; ++d) inner *= sizes.values[d];
  const int64_t n = sizes.values[axis], lines = n == 0 ? 0 : total / n;
  for (int64_t line = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; line < lines;
       line += int64_t{blockDim.x} * gridDim.x) {
    const int64_t base = (line / inner) * n * inner + line % inner;
    T running{};
    for (int64_t step = 0; step < n; ++step) {
      const int64_t at = base + (reverse ? n - 1 - step : step) * inner;
      const T value = x[at];
      if (exclusive) y[at] = running;
      running = static_cast<T>(running + value);
      if (!exclusive) y[at] = running;
    }
  }
}

class CumSumKernel : public Kernel {
 public:
  explicit CumSumKernel(const KernelSpec& spec) : spec_(spec) {
    reference::require_inputs(spec, 2);
    reference::require_index_input(spec, 1, "axis");
    if (spec.inputs[1].numel() != 1)
      reference::kernel_fail(spec, "axis must be a scalar, got sizes " + sizes_text(spec.inputs[1].sizes));
    reference::require_output(spec, 0, spec.inputs[0].dtype, spec.inputs[0].sizes);
    if (spec.inputs[0].sizes.empty()) reference::kernel_fail(spec, "x must have rank >= 1, got a scalar");
    require_rank_at_most(spec, spec.inputs[0].sizes.size(), "x");
    if (!reference::dispatch_numeric(spec.inputs[0].dtype, [](auto) {}))
      reference::kernel_fail(spec, "unsupported dtype " + std::string(dtype_name(spec.inputs[0].dtype)));
    exclusive_ = spec.attributes.get_int("exclusive", 0) != 0;
    reverse_ = spec.attributes.get_int("reverse", 0) != 0;
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    flag_.throw_if_raised(spec_,
                          [&](int) { return "an axis out of range for x of sizes " + sizes_text(inputs[0].sizes); });
    const int64_t total = inputs[0].numel();
    if (total == 0) return;
    DeviceGuard guard(stream);
    Sizes sizes;
    sizes.rank = static_cast<int>(inputs[0].sizes.size());
    std::copy(inputs[0].sizes.begin(), inputs[0].sizes.end(), sizes.values);
    reference::dispatch_numeric(inputs[0].dtype, [&](auto zero) {
      using T = decltype(zero);
      auto launch = [&](auto index) {
        using I = decltype(index);
        cumsum_kernel<T, I><<<grid_for(total), kBlock, 0, native_stream(stream)>>>(
            inputs[0].as<const T>(), outputs[0].as<T>(), sizes, Scalar<I>::of(inputs[1]), total, exclusive_, reverse_,
            flag_.device_ptr());
        ONNXTRAIN_CUDA_CHECK_LAUNCH((cumsum_kernel<T, I>));
      };
      if (inputs[1].dtype == DType::Int32)
        launch(int32_t{});
      else
        launch(int64_t{});
    });
  }

 private:
  KernelSpec spec_;
  DeviceErrorFlag flag_;
  bool exclusive_ = false, reverse_ = false;
};

}  // namespace

void register_cuda_cumsum_kernels(KernelRegistry& registry) {
  registry.add(movement_entry("CumSum", {DType::Float32, DType::Float64, DType::Int32, DType::Int64},
                              &reference::make_kernel<CumSumKernel>));
}

}  // namespace onnxtrain::cuda
