// CUDA GatherND and GatherNDGrad (ai.onnxtrain) with batch_dims, negative coordinates counted from the
// end (index math: element_index.h, layout checks: kernels/reference/gather_nd_index.h). A coordinate
// outside [-n, n) cannot throw from device code: GatherND writes 0 for it and raises the kernel's error
// flag, and the kernel's next run() throws Error naming the fault. GatherNDGrad is a deterministic
// scatter-add without float atomics, as GatherGrad (gather.cu): one warp per dX slice scans its batch's
// index rows 32 per ballot and adds the dY slices of the rows that name it in increasing order, so
// results equal the reference's bit for bit.
#include "kernels/cuda/indexed_copy.cuh"
#include "kernels/reference/gather_nd_index.h"

namespace onnxtrain::cuda {

namespace {

using reference::kernel_fail;

constexpr int kWarp = 32;
static_assert(kBlock % kWarp == 0, "gather_nd_grad_kernel needs whole warps per block");

// One warp per dX slice r = (batch, row): the lanes zero it, then scan the batch's index rows 32 at a
// time; a ballot marks those naming `row`, and for each of them in increasing order the lanes add its dY
// slice, lane l owning elements l, l + 32, ... The warp of row 0 of each batch reports bad coordinates.
template <typename T>
__global__ void gather_nd_grad_kernel(const T* dy, T* dx, GatherNDGeometry g, const void* indices, bool indices_int64,
                                      int64_t slices, int* flag) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / kWarp;
  // r is the same for every lane of a warp (blockDim is a multiple of 32), so the ballots see all 32 lanes.
  for (int64_t r = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarp; r < slices; r += warps) {
    const int64_t batch = r / g.rows, row = r % g.rows;
    T* slice = dx + r * g.inner;
    for (int64_t k = lane; k < g.inner; k += kWarp) slice[k] = T(0);
    for (int64_t base = 0; base < g.count; base += kWarp) {
      const int64_t j = base + lane;
      const int64_t named = j < g.count ? gather_nd_row(batch * g.count + j, g, indices, indices_int64) : -2;
      if (row == 0 && named == -1) raise_flag(flag, kIndexOutOfRange);
      unsigned int mask = __ballot_sync(0xffffffffu, named == row);
      while (mask != 0) {
        const T* from = dy + (batch * g.count + base + __ffs(static_cast<int>(mask)) - 1) * g.inner;
        mask &= mask - 1;
        for (int64_t k = lane; k < g.inner; k += kWarp) slice[k] += from[k];
      }
    }
  }
}

GatherNDGeometry geometry(const KernelSpec& spec, const reference::GatherNDLayout& l) {
  require_rank_at_most(spec, static_cast<size_t>(l.k), "the last axis of indices");
  GatherNDGeometry g;
  g.rows = l.rows;
  g.inner = l.inner;
  g.count = l.count;
  g.k = static_cast<int>(l.k);
  for (int64_t c = 0; c < l.k; ++c) g.dims[c] = l.dims[c];
  return g;
}

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
    geometry_ = geometry(spec, layout);
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
    geometry_ = geometry(spec, layout);
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
      gather_nd_grad_kernel<T><<<grid_for(slices_ * kWarp), kBlock, 0, native_stream(stream)>>>(
          inputs[0].as<const T>(), outputs[0].as<T>(), geometry_, inputs[2].data, int64_indices, slices_,
          flag_.device_ptr());
      ONNXTRAIN_CUDA_CHECK_LAUNCH(gather_nd_grad_kernel<T>);
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
