// Expand (opset 8, 13: numpy broadcast of the input with a `shape` input) and Tile (opset 6, 13: repeat
// along each axis by a `repeats` input). Both are one strided copy: a broadcast dim reads with stride 0.
#include <algorithm>
#include <optional>

#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class ExpandKernel : public DataMovementKernel {
 public:
  explicit ExpandKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 2);
    require_index_input(spec, 1, "shape");
    require_output_dtype(spec, 0, spec.inputs[0].dtype);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const std::vector<int64_t>& in = inputs[0].sizes;
    const std::vector<int64_t> shape = read_int_values(inputs[1]);
    const std::optional<std::vector<int64_t>> sizes = broadcast_sizes(in, shape);
    if (!sizes || std::any_of(shape.begin(), shape.end(), [](int64_t s) { return s < 0; }))
      fail("cannot expand input sizes " + sizes_to_string(in) + " to shape " + sizes_to_string(shape));
    require_output_sizes(outputs[0], *sizes);
    copy_strided(inputs[0], 0, broadcast_strides(in, *sizes), outputs[0]);
  }
};

class TileKernel : public DataMovementKernel {
 public:
  explicit TileKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 2);
    require_index_input(spec, 1, "repeats");
    require_output_dtype(spec, 0, spec.inputs[0].dtype);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const std::vector<int64_t>& in = inputs[0].sizes;
    const std::vector<int64_t> repeats = read_int_values(inputs[1]);
    if (repeats.size() != in.size())
      fail("repeats " + sizes_to_string(repeats) + " must have one entry per dim of input sizes " +
           sizes_to_string(in));
    std::vector<int64_t> sizes(in.size());
    for (size_t k = 0; k < in.size(); ++k) {
      if (repeats[k] < 0) fail("repeats " + sizes_to_string(repeats) + " has a negative entry");
      sizes[k] = in[k] * repeats[k];
    }
    require_output_sizes(outputs[0], sizes);
    // Output dim k of size repeats[k] * in[k] is, row-major, the pair (copy, i): view the output as
    // (r0, s0, r1, s1, ...) and read the input with strides (0, stride0, 0, stride1, ...).
    const std::vector<int64_t> in_strides = row_major_strides(in);
    std::vector<int64_t> paired_sizes, paired_strides;
    for (size_t k = 0; k < in.size(); ++k) {
      paired_sizes.insert(paired_sizes.end(), {repeats[k], in[k]});
      paired_strides.insert(paired_strides.end(), {0, in_strides[k]});
    }
    TensorView paired = outputs[0];
    paired.sizes = paired_sizes;
    copy_strided(inputs[0], 0, paired_strides, paired);
  }
};

}  // namespace

void register_reference_expand_tile_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Expand", kFixedSizeDTypes, make_kernel<ExpandKernel>));
  registry.add(reference_entry("Tile", kFixedSizeDTypes, make_kernel<TileKernel>));
}

}  // namespace onnxtrain
