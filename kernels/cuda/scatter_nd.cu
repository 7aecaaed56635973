// CUDA ScatterND (reduction none, add, mul, max, min), negative coordinates counted from the end (layout
// checks: kernels/reference/gather_nd_index.h). Written as a gather over the data's slices: one warp per
// output slice starts from the data slice and folds in, in increasing order, the update slices whose
// index row names it (nd_slice_fold.cuh), so repeated rows combine in the reference's order without
// atomics (under "none" the last write wins) and the output equals the reference's bit for bit. "none"
// moves any fixed-size dtype as words; the reductions take the arithmetic dtypes. A coordinate outside
// [-n, n) raises the kernel's error flag and the next run() throws Error naming the fault.
#include "kernels/cuda/nd_slice_fold.cuh"

namespace onnxtrain::cuda {

namespace {

using reference::kernel_fail;
using reference::ScatterReduction;

class ScatterNDKernel : public Kernel {
 public:
  explicit ScatterNDKernel(const KernelSpec& spec) : spec_(spec) {
    reference::require_inputs(spec, 3);
    reference::require_index_input(spec, 1, "indices");
    reference::require_same_dtype(spec, 2, 0);
    if (spec.attributes.get_int("batch_dims", 0) != 0) kernel_fail(spec, "ScatterND has no batch_dims");
    const reference::GatherNDLayout layout =
        reference::gather_nd_layout(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
    if (spec.inputs[2].sizes != layout.out_sizes) {
      kernel_fail(spec, "updates " + sizes_text(spec.inputs[2].sizes) +
                            " must have the sizes indices[:-1] + data[k:] = " + sizes_text(layout.out_sizes));
    }
    combine_.reduction = reference::scatter_reduction(spec);
    reference::require_output(spec, 0, spec.inputs[0].dtype, spec.inputs[0].sizes);
    if (!dispatch_element_size(dtype_size(spec.inputs[0].dtype), [](auto) {}))
      kernel_fail(spec, "unsupported dtype " + std::string(dtype_name(spec.inputs[0].dtype)));
    geometry_ = gather_nd_geometry(spec, layout);
    slices_ = layout.rows;
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    flag_.throw_if_raised(spec_, index_status_text);
    if (slices_ == 0 || outputs[0].numel() == 0) return;
    DeviceGuard guard(stream);
    require_device_indices(spec_, inputs[1]);
    const bool int64_indices = inputs[1].dtype == DType::Int64;
    auto launch = [&](auto zero) {
      using T = decltype(zero);
      nd_slice_fold_kernel<T><<<grid_for(slices_ * kWarp), kBlock, 0, native_stream(stream)>>>(
          inputs[0].as<const T>(), inputs[2].as<const T>(), outputs[0].as<T>(), geometry_, inputs[1].data,
          int64_indices, slices_, combine_, flag_.device_ptr());
      ONNXTRAIN_CUDA_CHECK_LAUNCH((nd_slice_fold_kernel<T, ScatterCombine>));
    };
    if (combine_.reduction == ScatterReduction::None) {
      dispatch_element_size(dtype_size(inputs[0].dtype), launch);
    } else {
      reference::dispatch_arithmetic(inputs[0].dtype, launch);
    }
  }

 private:
  KernelSpec spec_;
  GatherNDGeometry geometry_;
  ScatterCombine combine_{ScatterReduction::None};
  int64_t slices_ = 0;
  DeviceErrorFlag flag_;
};

}  // namespace

void register_cuda_scatter_nd_kernels(KernelRegistry& registry) {
  registry.add(movement_entry("ScatterND", reference::kFixedSizeDTypes, &reference::make_kernel<ScatterNDKernel>));
}

}  // namespace onnxtrain::cuda
