// CUDA Gather and GatherGrad (ai.onnxtrain) along one axis, with negative indices counted from the end.
// An index outside [-n, n) cannot throw from device code: Gather writes 0 for it and raises the kernel's
// error flag, and the kernel's next run() throws Error naming the fault (lazy, never a host sync).
// GatherGrad is a deterministic scatter-add without float atomics: one warp per dX row scans all indices
// (32 per ballot) and adds the dY rows that name its row in index order, so results are reproducible and
// equal the reference's (same addition order). The scan costs dX rows x indices / 32 ballots, fine for
// the models here; a sort-by-index segmented reduction would be the next step for huge embedding tables.
#include "kernels/cuda/indexed_copy.cuh"

namespace onnxtrain::cuda {

namespace {

using reference::kernel_fail;

constexpr int kWarp = 32;
static_assert(kBlock % kWarp == 0, "gather_grad_kernel needs whole warps per block");

// One warp per dX row r = (o, i): the lanes zero the row, then scan the indices 32 at a time; a ballot
// marks those naming row i, and for each of them in increasing j the lanes add dY row (o, j) into the
// row, lane l owning elements l, l + 32, ... So every dX element is written by one thread, in the
// reference's order, without atomics. The warp of row 0 also reports out-of-range indices.
template <typename T>
__global__ void gather_grad_kernel(const T* dy, T* dx, GatherGeometry g, const void* indices, bool indices_int64,
                                   int* flag) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / kWarp;
  const int64_t rows = g.outer * g.n;
  // r is the same for every lane of a warp (blockDim is a multiple of 32), so the ballots below see
  // all 32 lanes.
  for (int64_t r = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / kWarp; r < rows; r += warps) {
    const int64_t i = r % g.n;
    T* row = dx + r * g.inner;
    const T* dy_rows = dy + (r / g.n) * g.count * g.inner;
    for (int64_t k = lane; k < g.inner; k += kWarp) row[k] = T(0);
    for (int64_t base = 0; base < g.count; base += kWarp) {
      const int64_t j = base + lane;
      const int64_t named = j < g.count ? gather_row(read_index(indices, indices_int64, j), g.n) : -2;
      if (r == 0 && named == -1) raise_flag(flag, kIndexOutOfRange);
      unsigned int mask = __ballot_sync(0xffffffffu, named == i);
      while (mask != 0) {
        const T* from = dy_rows + (base + __ffs(static_cast<int>(mask)) - 1) * g.inner;
        mask &= mask - 1;
        for (int64_t k = lane; k < g.inner; k += kWarp) row[k] += from[k];
      }
    }
  }
}

// (outer, n, inner) around `axis` of `sizes`, with `count` indices.
GatherGeometry geometry(const std::vector<int64_t>& sizes, int64_t axis, int64_t count) {
  GatherGeometry g;
  g.outer = reference::product_of(sizes, 0, axis);
  g.n = sizes[axis];
  g.inner = reference::product_of(sizes, axis + 1);
  g.count = count;
  return g;
}

// Data sizes with the axis replaced by the indices' sizes.
std::vector<int64_t> gathered_sizes(const std::vector<int64_t>& sizes, int64_t axis,
                                    const std::vector<int64_t>& indices) {
  std::vector<int64_t> out(sizes.begin(), sizes.begin() + axis);
  out.insert(out.end(), indices.begin(), indices.end());
  out.insert(out.end(), sizes.begin() + axis + 1, sizes.end());
  return out;
}

class GatherKernel : public Kernel {
 public:
  explicit GatherKernel(const KernelSpec& spec) : spec_(spec) {
    reference::require_inputs(spec, 2);
    reference::require_index_input(spec, 1, "indices");
    const std::vector<int64_t>& sizes = spec.inputs[0].sizes;
    const auto rank = static_cast<int64_t>(sizes.size());
    if (rank == 0) kernel_fail(spec, "data must have rank >= 1, got a scalar");
    const int64_t axis = spec.attributes.get_int("axis", 0);
    const auto normalized = reference::normalized_axis(axis, rank);
    if (!normalized)
      kernel_fail(spec, "axis " + std::to_string(axis) + " is out of range for data of rank " + std::to_string(rank));
    reference::require_output(spec, 0, spec.inputs[0].dtype, gathered_sizes(sizes, *normalized, spec.inputs[1].sizes));
    if (!dispatch_element_size(dtype_size(spec.inputs[0].dtype), [](auto) {}))
      kernel_fail(spec, "unsupported dtype " + std::string(dtype_name(spec.inputs[0].dtype)));
    geometry_ = geometry(sizes, *normalized, spec.inputs[1].numel());
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
  GatherGeometry geometry_;
  DeviceErrorFlag flag_;
};

// GatherGrad(dY, x_shape, indices) -> dX shaped x_shape (the allocated output).
class GatherGradKernel : public Kernel {
 public:
  explicit GatherGradKernel(const KernelSpec& spec) : spec_(spec) {
    dtype_ = reference::require_shape_grad_inputs(spec, 3, {"dY", "x_shape", "indices"});
    const std::vector<int64_t>& sizes = spec.outputs[0].sizes;
    const auto rank = static_cast<int64_t>(sizes.size());
    if (rank == 0) kernel_fail(spec, "x_shape must have rank >= 1");
    const int64_t axis = reference::normalized_axis(spec, spec.attributes.get_int("axis", 0), rank);
    const std::vector<int64_t> dy_sizes = gathered_sizes(sizes, axis, spec.inputs[2].sizes);
    if (spec.inputs[0].sizes != dy_sizes)
      kernel_fail(spec, "dY has sizes " + sizes_text(spec.inputs[0].sizes) + ", expected " + sizes_text(dy_sizes));
    geometry_ = geometry(sizes, axis, spec.inputs[2].numel());
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    flag_.throw_if_raised(spec_, index_status_text);
    // With no dX rows there is nothing to write (and, unlike the reference, the indices go unchecked).
    const int64_t rows = geometry_.outer * geometry_.n;
    if (rows == 0) return;
    DeviceGuard guard(stream);
    require_device_indices(spec_, inputs[2]);
    const bool int64_indices = inputs[2].dtype == DType::Int64;
    reference::dispatch_float(dtype_, [&](auto zero) {
      using T = decltype(zero);
      gather_grad_kernel<T><<<grid_for(rows * kWarp), kBlock, 0, native_stream(stream)>>>(
          inputs[0].as<const T>(), outputs[0].as<T>(), geometry_, inputs[2].data, int64_indices, flag_.device_ptr());
      ONNXTRAIN_CUDA_CHECK_LAUNCH(gather_grad_kernel<T>);
    });
  }

 private:
  KernelSpec spec_;
  DType dtype_ = DType::Undefined;
  GatherGeometry geometry_;
  DeviceErrorFlag flag_;
};

}  // namespace

void register_cuda_gather_kernels(KernelRegistry& registry) {
  registry.add(movement_entry("Gather", reference::kFixedSizeDTypes, &reference::make_kernel<GatherKernel>));
  registry.add(
      movement_entry("GatherGrad", reference::kFloatDTypes, &reference::make_kernel<GatherGradKernel>, "ai.onnxtrain"));
}

}  // namespace onnxtrain::cuda
