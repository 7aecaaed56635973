// CUDA GatherND and GatherNDGrad (ai.onnxtrain) with batch_dims, negative coordinates counted from the
// end (index math: element_index.h, layout checks: kernels/reference/gather_nd_index.h). A coordinate
// outside [-n, n) cannot throw from device code: GatherND writes 0 for it and raises the kernel's error
// flag, and the kernel's next run() throws Error naming the fault. GatherNDGrad is a deterministic
// scatter-add without float atomics, as GatherGrad (gather.cu): one warp per dX slice scans its batch's
// index rows 32 per ballot and adds the dY slices of the rows that name it in increasing order, so
// results equal the reference's bit for bit (nd_slice_fold.cuh, shared with ScatterND).
#include "kernels/cuda/nd_slice_fold.cuh"
#include "kernels/reference/gather_nd_index.h"

namespace onnxtrain::cuda {

GatherNDGeometry gather_nd_geometry(const KernelSpec& spec, const reference::GatherNDLayout& l) {
  require_rank_at_most(spec, static_cast<size_t>(l.k), "the last axis of indices");
  GatherNDGeometry g;
  g.rows = l.rows;
  g.inner = l.inner;
  g.count = l.count;
  g.k = static_cast<int>(l.k);
  for (int64_t c = 0; c < l.k; ++c) g.dims[c] = l.dims[c];
  return g;
}

namespace {

using reference::kernel_fail;

class GatherNDKernel : public Kernel {
 public:
  explicit GatherNDKernel(const KernelSpec& spec) : spec_(spec) {
    reference::require_inputs(spec, 2);
    reference::require_index_input(spec, 1, "indices");
    const reference::GatherNDLayout layout =
        reference::gather_nd_layout(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
    reference::require_output(spec, 0, spec.inputs[0].dtype, layout.out_sizes);
    if (!dispatch_element_size(dtype_size(spec.inputs[0].dtype), [](auto) {}))
      kernel_fail(spec, "unsupported dtype " + std::string(dtype_name(spec.inputs[0].dtype)));
    geometry_ = gather_nd_geometry(spec, layout);
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
  GatherNDGeometry geometry_;
  DeviceErrorFlag flag_;
};

// GatherNDGrad(dY, x_shape, indices) -> dX shaped x_shape (the allocated output).
class GatherNDGradKernel : public Kernel {
 public:
  explicit GatherNDGradKernel(const KernelSpec& spec) : spec_(spec) {
    dtype_ = reference::require_shape_grad_inputs(spec, 3, {"dY", "x_shape", "indices"});
    const reference::GatherNDLayout layout =
        reference::gather_nd_layout(spec, spec.outputs[0].sizes, spec.inputs[2].sizes);
    if (spec.inputs[0].sizes != layout.out_sizes) {
      kernel_fail(spec,
                  "dY has sizes " + sizes_text(spec.inputs[0].sizes) + ", expected " + sizes_text(layout.out_sizes));
    }
    geometry_ = gather_nd_geometry(spec, layout);
    slices_ = layout.batches * layout.rows;
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    flag_.throw_if_raised(spec_, index_status_text);
    // With no dX slices there is nothing to write (and, unlike the reference, the indices go unchecked).
    if (slices_ == 0 || outputs[0].numel() == 0) return;
    DeviceGuard guard(stream);
    require_device_indices(spec_, inputs[2]);
    const bool int64_indices = inputs[2].dtype == DType::Int64;
    reference::dispatch_float(dtype_, [&](auto zero) {
      using T = decltype(zero);
      const ScatterCombine add{reference::ScatterReduction::Add};
      nd_slice_fold_kernel<T><<<grid_for(slices_ * kWarp), kBlock, 0, native_stream(stream)>>>(
          nullptr, inputs[0].as<const T>(), outputs[0].as<T>(), geometry_, inputs[2].data, int64_indices, slices_, add,
          flag_.device_ptr());
      ONNXTRAIN_CUDA_CHECK_LAUNCH((nd_slice_fold_kernel<T, ScatterCombine>));
    });
  }

 private:
  KernelSpec spec_;
  DType dtype_ = DType::Undefined;
  GatherNDGeometry geometry_;
  int64_t slices_ = 0;
  DeviceErrorFlag flag_;
};

}  // namespace

void register_cuda_gather_nd_kernels(KernelRegistry& registry) {
  registry.add(movement_entry("GatherND", reference::kFixedSizeDTypes, &reference::make_kernel<GatherNDKernel>));
  registry.add(movement_entry("GatherNDGrad", reference::kFloatDTypes, &reference::make_kernel<GatherNDGradKernel>,
                              "ai.onnxtrain"));
}

}  // namespace onnxtrain::cuda
