// Reshape (opset 1: `shape` attribute, 5: input, 14: allowzero), Flatten, Squeeze, Unsqueeze and Identity:
// the output holds the input's bytes unchanged under new sizes, which the caller allocated. Reshape and
// Flatten also check that the sizes they compute match the allocation.
#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class ByteCopyKernel : public DataMovementKernel {
 public:
  explicit ByteCopyKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 1);
    require_output_dtype(spec, 0, spec.inputs[0].dtype);
    if (spec.inputs[0].numel() != spec.outputs[0].numel()) {
      fail("input sizes " + sizes_to_string(spec.inputs[0].sizes) + " and output sizes " +
           sizes_to_string(spec.outputs[0].sizes) + " hold different element counts");
    }
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    check_sizes(inputs, outputs[0]);
    if (inputs[0].numel() != outputs[0].numel()) {
      fail("input sizes " + sizes_to_string(inputs[0].sizes) + " and output sizes " +
           sizes_to_string(outputs[0].sizes) + " hold different element counts");
    }
    copy_elements(inputs[0], 0, outputs[0], 0, inputs[0].numel());
  }

 protected:
  virtual void check_sizes(std::span<const TensorView>, const TensorView&) const {}
};

constexpr int kReshapeInputSince = 5;
constexpr int kAllowZeroSince = 14;

class ReshapeKernel : public ByteCopyKernel {
 public:
  explicit ReshapeKernel(const KernelSpec& spec) : ByteCopyKernel(spec) {
    if (spec.opset < kReshapeInputSince) {
      if (!spec.attributes.has("shape")) fail("the shape attribute is required");
    } else {
      require_inputs(spec, 2);
      require_index_input(spec, 1, "shape");
    }
  }

 protected:
  // The target with 0 (copy the input dim, unless allowzero) and -1 (whatever is left) resolved.
  void check_sizes(std::span<const TensorView> inputs, const TensorView& out) const override {
    std::vector<int64_t> target =
        spec_.opset < kReshapeInputSince ? spec_.attributes.get_ints("shape") : read_int_values(inputs[1]);
    const bool allow_zero = spec_.opset >= kAllowZeroSince && spec_.attributes.get_int("allowzero", 0) != 0;
    const std::vector<int64_t>& in = inputs[0].sizes;
    int64_t known = 1;
    std::optional<size_t> inferred;
    for (size_t i = 0; i < target.size(); ++i) {
      if (target[i] == 0 && !allow_zero) {
        if (i >= in.size())
          fail("shape " + sizes_to_string(target) + " copies dim " + std::to_string(i) + " of " + sizes_to_string(in));
        target[i] = in[i];
      }
      if (target[i] == -1) {
        if (inferred) fail("shape " + sizes_to_string(target) + " has more than one -1");
        inferred = i;
      } else if (target[i] < 0) {
        fail("shape " + sizes_to_string(target) + " has an invalid size " + std::to_string(target[i]));
      } else {
        known *= target[i];
      }
    }
    if (inferred) {
      if (known == 0 || inputs[0].numel() % known != 0)
        fail("cannot reshape " + sizes_to_string(in) + " to " + sizes_to_string(target));
      target[*inferred] = inputs[0].numel() / known;
    }
    require_output_sizes(out, target);
  }
};

class FlattenKernel : public ByteCopyKernel {
 public:
  explicit FlattenKernel(const KernelSpec& spec) : ByteCopyKernel(spec) {
    const auto rank = static_cast<int64_t>(spec.inputs[0].sizes.size());
    const int64_t axis = spec.attributes.get_int("axis", 1);
    if (axis < -rank || axis > rank)  // the split point may equal the rank
      fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    axis_ = axis < 0 ? axis + rank : axis;
  }

 protected:
  void check_sizes(std::span<const TensorView> inputs, const TensorView& out) const override {
    int64_t rows = 1, columns = 1;
    for (size_t k = 0; k < inputs[0].sizes.size(); ++k)
      (static_cast<int64_t>(k) < axis_ ? rows : columns) *= inputs[0].sizes[k];
    require_output_sizes(out, {rows, columns});
  }

 private:
  int64_t axis_ = 1;
};

}  // namespace

void register_reference_reshape_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Reshape", kFixedSizeDTypes, make_kernel<ReshapeKernel>));
  registry.add(reference_entry("Flatten", kFixedSizeDTypes, make_kernel<FlattenKernel>));
  registry.add(reference_entry("Squeeze", kFixedSizeDTypes, make_kernel<ByteCopyKernel>));
  registry.add(reference_entry("Unsqueeze", kFixedSizeDTypes, make_kernel<ByteCopyKernel>));
  registry.add(reference_entry("Identity", kFixedSizeDTypes, make_kernel<ByteCopyKernel>));
}

}  // namespace onnxtrain
