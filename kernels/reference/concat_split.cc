// Concat (opset 1: axis defaults to 1, 4: axis required, 11: negative axis) and Split (opset 1/2/11:
// `split` attribute, 13: `split` input, 18: num_outputs). Split's chunk sizes are its outputs' sizes
// along the axis; a `split` list, when given, must agree with them.
#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class ConcatKernel : public DataMovementKernel {
 public:
  explicit ConcatKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    if (spec.inputs.empty()) fail("at least one input is required");
    require_inputs(spec, spec.inputs.size());
    const DType dtype = spec.inputs[0].dtype;
    const auto rank = static_cast<int64_t>(spec.inputs[0].sizes.size());
    for (size_t i = 0; i < spec.inputs.size(); ++i) {
      if (spec.inputs[i].dtype != dtype)
        fail("input " + std::to_string(i) + " has dtype " + std::string(dtype_name(spec.inputs[i].dtype)) +
             ", input 0 has " + std::string(dtype_name(dtype)));
      if (static_cast<int64_t>(spec.inputs[i].sizes.size()) != rank)
        fail("input " + std::to_string(i) + " has rank " + std::to_string(spec.inputs[i].sizes.size()) +
             ", input 0 has " + std::to_string(rank));
    }
    require_output_dtype(spec, 0, dtype);
    if (rank == 0) fail("cannot concatenate scalars");
    if (spec.opset >= 4 && !spec.attributes.has("axis")) fail("the axis attribute is required");
    const int64_t axis = spec.attributes.get_int("axis", 1);
    axis_ = normalized_axis(spec, axis, rank);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    std::vector<int64_t> out_sizes = inputs[0].sizes;
    out_sizes[axis_] = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      for (size_t k = 0; k < out_sizes.size(); ++k) {
        if (static_cast<int64_t>(k) != axis_ && inputs[i].sizes[k] != out_sizes[k])
          fail("input " + std::to_string(i) + " has sizes " + sizes_to_string(inputs[i].sizes) +
               ", which differ from " + sizes_to_string(inputs[0].sizes) + " outside axis " + std::to_string(axis_));
      }
      out_sizes[axis_] += inputs[i].sizes[axis_];
    }
    require_output_sizes(outputs[0], out_sizes);
    auto [outer, inner] = outer_inner(out_sizes, axis_);
    int64_t written = 0;
    for (int64_t o = 0; o < outer; ++o) {
      for (const TensorView& in : inputs) {
        const int64_t block = in.sizes[axis_] * inner;
        copy_elements(in, o * block, outputs[0], written, block);
        written += block;
      }
    }
  }

 private:
  int64_t axis_ = 0;
};

constexpr int kSplitInputSince = 13;

class SplitKernel : public DataMovementKernel {
 public:
  explicit SplitKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 1);
    if (spec.outputs.empty()) fail("at least one output is required");
    for (size_t i = 0; i < spec.outputs.size(); ++i) require_output_dtype(spec, i, spec.inputs[0].dtype);
    const auto rank = static_cast<int64_t>(spec.inputs[0].sizes.size());
    const int64_t axis = spec.attributes.get_int("axis", 0);
    axis_ = normalized_axis(spec, axis, rank);
    if (spec.opset >= kSplitInputSince && has_input(spec, 1)) require_index_input(spec, 1, "split");
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView& in = inputs[0];
    std::optional<std::vector<int64_t>> split;
    if (spec_.opset < kSplitInputSince && spec_.attributes.has("split")) split = spec_.attributes.get_ints("split");
    if (const TensorView* given = optional_input(inputs, 1); given && spec_.opset >= kSplitInputSince)
      split = read_int_values(*given);
    if (split && split->size() != outputs.size()) {
      fail("split " + sizes_to_string(*split) + " has " + std::to_string(split->size()) + " entries for " +
           std::to_string(outputs.size()) + " outputs");
    }
    auto [outer, inner] = outer_inner(in.sizes, axis_);
    const int64_t in_block = in.sizes[axis_] * inner;
    int64_t total = 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::vector<int64_t> expected = in.sizes;
      expected[axis_] = split ? (*split)[i] : outputs[i].sizes.size() == in.sizes.size() ? outputs[i].sizes[axis_] : -1;
      require_output_sizes(outputs[i], expected, i);
      total += expected[axis_];
    }
    if (total != in.sizes[axis_]) {
      fail("the outputs take " + std::to_string(total) + " elements along axis " + std::to_string(axis_) +
           " but the input has " + std::to_string(in.sizes[axis_]));
    }
    int64_t start = 0;
    for (const TensorView& out : outputs) {
      const int64_t chunk = out.sizes[axis_];
      for (int64_t o = 0; o < outer; ++o)
        copy_elements(in, o * in_block + start * inner, out, o * chunk * inner, chunk * inner);
      start += chunk;
    }
  }

 private:
  int64_t axis_ = 0;
};

}  // namespace

void register_reference_concat_split_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Concat", kFixedSizeDTypes, make_kernel<ConcatKernel>));
  registry.add(reference_entry("Split", kFixedSizeDTypes, make_kernel<SplitKernel>));
}

}  // namespace onnxtrain
