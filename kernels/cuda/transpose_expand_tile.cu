// CUDA Transpose, Expand, Tile, DepthToSpace and SpaceToDepth: one strided gather each, out[flat] =
// in[map.source(flat)] with the StridedMap (strided_index.h) built at prepare time from the sizes (Expand's shape and
// Tile's repeats inputs are device tensors that only repeat the allocated output's sizes). Elements move as
// 1/2/4/8-byte words, so every fixed-size dtype shares one kernel per width. The gather reads uncoalesced for
// transposes of the last dim; a tiled shared-memory transpose would be the next step if it shows up in
// profiles.
#include "graph/depth_space_view.h"
#include "kernels/cuda/data_movement_common.cuh"

namespace onnxtrain::cuda {

namespace {

using reference::kernel_fail;

template <typename W>
__global__ void strided_gather_kernel(const W* in, W* out, StridedMap map, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x)
    out[i] = in[map.source(i)];
}

class StridedGatherKernel : public Kernel {
 public:
  StridedGatherKernel(const StridedMap& map, int64_t n, size_t element) : map_(map), n_(n), element_(element) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    if (n_ == 0) return;
    DeviceGuard guard(stream);
    dispatch_element_size(element_, [&](auto word) {
      using W = decltype(word);
      strided_gather_kernel<W>
          <<<grid_for(n_), kBlock, 0, native_stream(stream)>>>(inputs[0].as<const W>(), outputs[0].as<W>(), map_, n_);
      ONNXTRAIN_CUDA_CHECK_LAUNCH(strided_gather_kernel<W>);
    });
  }

 private:
  StridedMap map_;
  int64_t n_;
  size_t element_;
};

// Input 0 present, output 0 of its dtype with `sizes`, ranks the index structs hold, a word-sized dtype.
void require_strided(const KernelSpec& spec, const std::vector<int64_t>& sizes) {
  reference::require_output(spec, 0, spec.inputs[0].dtype, sizes);
  require_rank_at_most(spec, spec.inputs[0].sizes.size(), "the input");
  require_rank_at_most(spec, sizes.size(), "the output");
  if (!dispatch_element_size(dtype_size(spec.inputs[0].dtype), [](auto) {}))
    kernel_fail(spec, "unsupported dtype " + std::string(dtype_name(spec.inputs[0].dtype)));
}

std::unique_ptr<Kernel> strided_kernel(const KernelSpec& spec, const StridedMap& map) {
  return std::make_unique<StridedGatherKernel>(map, spec.outputs[0].numel(), dtype_size(spec.inputs[0].dtype));
}

std::unique_ptr<Kernel> make_transpose(const KernelSpec& spec) {
  reference::require_inputs(spec, 1);
  const std::vector<int64_t>& in = spec.inputs[0].sizes;
  const auto rank = static_cast<int64_t>(in.size());
  const std::vector<int64_t> perm = reference::transpose_perm(spec);
  std::vector<bool> seen(rank, false);
  bool valid = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t p : perm) {
    valid = valid && p >= 0 && p < rank && !seen[p];
    if (valid) seen[p] = true;
  }
  if (!valid)
    kernel_fail(spec, "perm " + sizes_text(perm) + " is not a permutation of the " + std::to_string(rank) + " dims");
  std::vector<int64_t> sizes;
  for (int64_t p : perm) sizes.push_back(in[p]);
  require_strided(spec, sizes);
  return strided_kernel(spec, transpose_map(in, perm));
}

// DepthToSpace and SpaceToDepth: the transpose of x's 6-D view (graph/depth_space_view.h).
std::unique_ptr<Kernel> make_depth_space(const KernelSpec& spec) {
  reference::require_inputs(spec, 1);
  const DepthSpaceView view =
      depth_space_view(spec.op_type == "DepthToSpace", spec.attributes.get_string("mode", "DCR"), spec.inputs[0].sizes,
                       spec.attributes.get_int("blocksize", 0));
  if (!view.error.empty()) kernel_fail(spec, view.error);
  require_strided(spec, view.out);
  return strided_kernel(spec, transpose_map(view.sizes, view.perm));
}

std::unique_ptr<Kernel> make_expand(const KernelSpec& spec) {
  reference::require_inputs(spec, 2);
  reference::require_index_input(spec, 1, "shape");
  const std::vector<int64_t>& in = spec.inputs[0].sizes;
  const std::vector<int64_t>& out = reference::require_output(spec, 0).sizes;
  if (!reference::broadcasts_onto(in, out))
    kernel_fail(spec, "cannot expand input sizes " + sizes_text(in) + " to output sizes " + sizes_text(out));
  require_strided(spec, out);
  return strided_kernel(spec, expand_map(in, out));
}

std::unique_ptr<Kernel> make_tile(const KernelSpec& spec) {
  reference::require_inputs(spec, 2);
  reference::require_index_input(spec, 1, "repeats");
  const std::vector<int64_t>& in = spec.inputs[0].sizes;
  const std::vector<int64_t>& out = reference::require_output(spec, 0).sizes;
  bool valid = out.size() == in.size();
  for (size_t k = 0; valid && k < in.size(); ++k) valid = in[k] == 0 ? out[k] == 0 : out[k] % in[k] == 0;
  if (!valid)
    kernel_fail(spec, "output sizes " + sizes_text(out) + " are not whole repeats of input sizes " + sizes_text(in));
  require_strided(spec, out);
  return strided_kernel(spec, tile_map(in, out));
}

}  // namespace

void register_cuda_transpose_expand_kernels(KernelRegistry& registry) {
  registry.add(movement_entry("Transpose", reference::kFixedSizeDTypes, &make_transpose));
  registry.add(movement_entry("Expand", reference::kFixedSizeDTypes, &make_expand));
  registry.add(movement_entry("Tile", reference::kFixedSizeDTypes, &make_tile));
  registry.add(movement_entry("DepthToSpace", reference::kFixedSizeDTypes, &make_depth_space));
  registry.add(movement_entry("SpaceToDepth", reference::kFixedSizeDTypes, &make_depth_space));
}

}  // namespace onnxtrain::cuda
