// CUDA ScatterElements (reduction none, add, mul, max, min) along one axis, negative indices counted from
// the end (index math: element_index.h). Written as a gather: one thread per output element starts from
// the data element and applies, in increasing order, the updates whose index names it. So repeated
// indices combine in the reference's order without atomics (under "none" the last write wins, as in the
// reference), and the output equals the reference's bit for bit. The scan visits indices-along-axis
// positions per element in the indices' range. "none" moves any fixed-size dtype as words; the
// reductions take the arithmetic dtypes. An index outside [-n, n) raises the kernel's error flag (the
// element keeps what the other positions gave it) and the next run() throws Error naming the fault.
#include "kernels/cuda/nd_slice_fold.cuh"

namespace onnxtrain::cuda {

namespace {

using reference::kernel_fail;
using reference::ScatterReduction;

template <typename T>
__global__ void scatter_elements_kernel(const T* data, const T* updates, T* out, ElementsGeometry g,
                                        const void* indices, bool indices_int64, ScatterCombine combine, int64_t n,
                                        int* flag) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    bool bad = false;
    out[i] = scatter_elements_fold(i, g, indices, indices_int64, data[i], updates, combine, &bad);
    if (bad) raise_flag(flag, kIndexOutOfRange);
  }
}

class ScatterElementsKernel : public Kernel {
 public:
  explicit ScatterElementsKernel(const KernelSpec& spec) : spec_(spec) {
    reference::require_inputs(spec, 3);
    reference::require_index_input(spec, 1, "indices");
    reference::require_same_dtype(spec, 2, 0);
    if (spec.inputs[2].sizes != spec.inputs[1].sizes) {
      kernel_fail(spec, "updates " + sizes_text(spec.inputs[2].sizes) + " must have the sizes of indices " +
                            sizes_text(spec.inputs[1].sizes));
    }
    const int64_t axis = reference::elements_axis(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
    require_rank_at_most(spec, spec.inputs[0].sizes.size(), "data");
    combine_.reduction = reference::scatter_reduction(spec);
    reference::require_output(spec, 0, spec.inputs[0].dtype, spec.inputs[0].sizes);
    if (!dispatch_element_size(dtype_size(spec.inputs[0].dtype), [](auto) {}))
      kernel_fail(spec, "unsupported dtype " + std::string(dtype_name(spec.inputs[0].dtype)));
    geometry_ = elements_geometry(spec.inputs[0].sizes, spec.inputs[1].sizes, axis);
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    flag_.throw_if_raised(spec_, index_status_text);
    const int64_t n = outputs[0].numel();
    if (n == 0) return;
    DeviceGuard guard(stream);
    if (inputs[1].numel() > 0 && on_host(inputs[1]))
      kernel_fail(spec_, "the indices are in host memory; the CUDA kernel reads them on the device");
    const bool int64_indices = inputs[1].dtype == DType::Int64;
    auto launch = [&](auto zero) {
      using T = decltype(zero);
      scatter_elements_kernel<T><<<grid_for(n), kBlock, 0, native_stream(stream)>>>(
          inputs[0].as<const T>(), inputs[2].as<const T>(), outputs[0].as<T>(), geometry_, inputs[1].data,
          int64_indices, combine_, n, flag_.device_ptr());
      ONNXTRAIN_CUDA_CHECK_LAUNCH(scatter_elements_kernel<T>);
    };
    if (combine_.reduction == ScatterReduction::None) {
      dispatch_element_size(dtype_size(inputs[0].dtype), launch);
    } else {
      reference::dispatch_arithmetic(inputs[0].dtype, launch);
    }
  }

 private:
  KernelSpec spec_;
  ElementsGeometry geometry_;
  ScatterCombine combine_{ScatterReduction::None};
  DeviceErrorFlag flag_;
};

}  // namespace

void register_cuda_scatter_elements_kernels(KernelRegistry& registry) {
  registry.add(
      movement_entry("ScatterElements", reference::kFixedSizeDTypes, &reference::make_kernel<ScatterElementsKernel>));
}

}  // namespace onnxtrain::cuda
