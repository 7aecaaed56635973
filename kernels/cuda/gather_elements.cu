// CUDA GatherElements and GatherElementsGrad (ai.onnxtrain) along one axis, with negative indices counted
// from the end (index math: element_index.h). An index outside [-n, n) cannot throw from device code:
// GatherElements writes 0 for it and raises the kernel's error flag, and the kernel's next run() throws
// Error naming the fault (lazy, never a host sync). GatherElementsGrad is a deterministic scatter-add
// without float atomics: one thread per dX element sums, in increasing order, the dY elements along the
// axis whose index names it, so results equal the reference's bit for bit. That scans indices-along-axis
// positions per dX element (the axis is a sequence or class axis in the models here, short enough).
#include "kernels/cuda/indexed_copy.cuh"
#include "kernels/reference/elements_index.h"

namespace onnxtrain::cuda {

namespace {

using reference::kernel_fail;

struct AddOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

template <typename T>
__global__ void gather_elements_grad_kernel(const T* dy, T* dx, ElementsGeometry g, const void* indices,
                                            bool indices_int64, int64_t n, int* flag) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    bool bad = false;
    dx[i] = scatter_elements_fold(i, g, indices, indices_int64, T(0), dy, AddOp{}, &bad);
    if (bad) raise_flag(flag, kIndexOutOfRange);
  }
}

class GatherElementsKernel : public Kernel {
 public:
  explicit GatherElementsKernel(const KernelSpec& spec) : spec_(spec) {
    reference::require_inputs(spec, 2);
    reference::require_index_input(spec, 1, "indices");
    const int64_t axis = reference::elements_axis(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
    require_rank_at_most(spec, spec.inputs[0].sizes.size(), "data");
    reference::require_output(spec, 0, spec.inputs[0].dtype, spec.inputs[1].sizes);
    if (!dispatch_element_size(dtype_size(spec.inputs[0].dtype), [](auto) {}))
      kernel_fail(spec, "unsupported dtype " + std::string(dtype_name(spec.inputs[0].dtype)));
    geometry_ = elements_geometry(spec.inputs[0].sizes, spec.inputs[1].sizes, axis);
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    flag_.throw_if_raised(spec_, index_status_text);
    const int64_t n = outputs[0].numel();
    if (n == 0) return;
    DeviceGuard guard(stream);
    require_device_indices(spec_, inputs[1]);
    const bool int64_indices = inputs[1].dtype == DType::Int64;
    dispatch_element_size(dtype_size(inputs[0].dtype), [&](auto word) {
      using W = decltype(word);
      gather_copy_kernel<W><<<grid_for(n), kBlock, 0, native_stream(stream)>>>(
          inputs[0].as<const W>(), outputs[0].as<W>(), geometry_, inputs[1].data, int64_indices, n, flag_.device_ptr());
      ONNXTRAIN_CUDA_CHECK_LAUNCH((gather_copy_kernel<W, decltype(geometry_)>));
    });
  }

 private:
  KernelSpec spec_;
  ElementsGeometry geometry_;
  DeviceErrorFlag flag_;
};

// GatherElementsGrad(dY, x_shape, indices) -> dX shaped x_shape (the allocated output).
class GatherElementsGradKernel : public Kernel {
 public:
  explicit GatherElementsGradKernel(const KernelSpec& spec) : spec_(spec) {
    dtype_ = reference::require_shape_grad_inputs(spec, 3, {"dY", "x_shape", "indices"});
    const int64_t axis = reference::elements_axis(spec, spec.outputs[0].sizes, spec.inputs[2].sizes);
    require_rank_at_most(spec, spec.outputs[0].sizes.size(), "x_shape");
    if (spec.inputs[0].sizes != spec.inputs[2].sizes) {
      kernel_fail(spec, "dY has sizes " + sizes_text(spec.inputs[0].sizes) + ", expected the indices' " +
                            sizes_text(spec.inputs[2].sizes));
    }
    geometry_ = elements_geometry(spec.outputs[0].sizes, spec.inputs[2].sizes, axis);
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    flag_.throw_if_raised(spec_, index_status_text);
    // With no dX elements there is nothing to write (and, unlike the reference, the indices go unchecked).
    const int64_t n = outputs[0].numel();
    if (n == 0) return;
    DeviceGuard guard(stream);
    require_device_indices(spec_, inputs[2]);
    const bool int64_indices = inputs[2].dtype == DType::Int64;
    reference::dispatch_float(dtype_, [&](auto zero) {
      using T = decltype(zero);
      gather_elements_grad_kernel<T><<<grid_for(n), kBlock, 0, native_stream(stream)>>>(
          inputs[0].as<const T>(), outputs[0].as<T>(), geometry_, inputs[2].data, int64_indices, n, flag_.device_ptr());
      ONNXTRAIN_CUDA_CHECK_LAUNCH(gather_elements_grad_kernel<T>);
    });
  }

 private:
  KernelSpec spec_;
  DType dtype_ = DType::Undefined;
  ElementsGeometry geometry_;
  DeviceErrorFlag flag_;
};

}  // namespace

void register_cuda_gather_elements_kernels(KernelRegistry& registry) {
  registry.add(
      movement_entry("GatherElements", reference::kFixedSizeDTypes, &reference::make_kernel<GatherElementsKernel>));
  registry.add(movement_entry("GatherElementsGrad", reference::kFloatDTypes,
                              &reference::make_kernel<GatherElementsGradKernel>, "ai.onnxtrain"));
}

}  // namespace onnxtrain::cuda
