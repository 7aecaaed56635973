// Gather (opset 1, 11: negative indices, 13): out[o, j..., i] = data[o, indices[j...], i] along `axis`.
// An index outside [-n, n) is bad data: run() throws Error naming it.
#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class GatherKernel : public DataMovementKernel {
 public:
  explicit GatherKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 2);
    require_index_input(spec, 1, "indices");
    require_output_dtype(spec, 0, spec.inputs[0].dtype);
    const auto rank = static_cast<int64_t>(spec.inputs[0].sizes.size());
    if (rank == 0) fail("data must have rank >= 1, got a scalar");
    const int64_t axis = spec.attributes.get_int("axis", 0);
    auto normalized = normalized_axis(axis, rank);
    if (!normalized) fail("axis " + std::to_string(axis) + " is out of range for data of rank " + std::to_string(rank));
    axis_ = *normalized;
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &data = inputs[0], &indices_view = inputs[1], &out = outputs[0];
    const std::vector<int64_t>& sizes = data.sizes;
    std::vector<int64_t> out_sizes(sizes.begin(), sizes.begin() + axis_);
    out_sizes.insert(out_sizes.end(), indices_view.sizes.begin(), indices_view.sizes.end());
    out_sizes.insert(out_sizes.end(), sizes.begin() + axis_ + 1, sizes.end());
    require_output_sizes(out, out_sizes);

    const std::vector<int64_t> indices = read_int_values(indices_view);
    const int64_t n = sizes[axis_];
    const int64_t outer = product_of(sizes, 0, axis_), inner = product_of(sizes, axis_ + 1);
    for (size_t j = 0; j < indices.size(); ++j) {  // check every index, also when the output is empty
      if (indices[j] < -n || indices[j] >= n) {
        fail("index " + std::to_string(indices[j]) + " (position " + std::to_string(j) + ") is out of range for axis " +
             std::to_string(axis_) + " of size " + std::to_string(n) + " (data shape " + sizes_to_string(sizes) + ")");
      }
    }
    const auto count = static_cast<int64_t>(indices.size());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < count; ++j) {
        const int64_t i = indices[j] < 0 ? indices[j] + n : indices[j];
        copy_elements(data, (o * n + i) * inner, out, (o * count + j) * inner, inner);
      }
    }
  }

 private:
  int64_t axis_ = 0;
};

}  // namespace

void register_reference_gather_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Gather", kFixedSizeDTypes, make_kernel<GatherKernel>));
}

}  // namespace onnxtrain
