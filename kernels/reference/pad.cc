// Pad (opset 1: `paddings` attribute; 2: `pads`/`value` attributes; 11: pads and optional constant_value
// inputs; 18: optional axes input; 19: wrap mode). Pads are [begins..., ends...]; a negative pad crops.
// Modes: constant, reflect (mirror without repeating the edge), edge (repeat the edge), wrap (periodic).
#include "kernels/reference/copy.h"
#include "kernels/reference/element_convert.h"
#include "kernels/reference/pad_mode.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

constexpr int kInputsSince = 11;
constexpr int kAxesSince = 18;

class PadKernel : public DataMovementKernel {
 public:
  explicit PadKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 1);
    constant_ = Tensor(spec.inputs[0].dtype, {1});
    require_output_dtype(spec, 0, spec.inputs[0].dtype);
    mode_ = read_pad_mode(spec);

    if (spec.opset < kInputsSince) {
      pads_attribute_ = spec.opset <= 1 && spec.attributes.has("paddings") ? "paddings" : "pads";
      if (!spec.attributes.has(pads_attribute_)) fail("the " + pads_attribute_ + " attribute is required");
      store_double(TensorView::of(constant_), 0, spec.attributes.get_float("value", 0.0));
      return;
    }
    require_inputs(spec, 2);
    require_index_input(spec, 1, "pads");
    if (has_input(spec, 2) && spec.inputs[2].dtype != spec.inputs[0].dtype) {
      fail("constant_value has dtype " + std::string(dtype_name(spec.inputs[2].dtype)) + ", expected " +
           std::string(dtype_name(spec.inputs[0].dtype)) + " like the data");
    }
    if (spec.opset >= kAxesSince && has_input(spec, 3)) require_index_input(spec, 3, "axes");
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView& data = inputs[0];
    const std::vector<int64_t>& in = data.sizes;
    const auto rank = static_cast<int64_t>(in.size());
    const bool from_inputs = spec_.opset >= kInputsSince;
    const std::vector<int64_t> pads =
        from_inputs ? read_int_values(inputs[1]) : spec_.attributes.get_ints(pads_attribute_);
    std::vector<int64_t> axes;
    const TensorView* axes_input = from_inputs && spec_.opset >= kAxesSince ? optional_input(inputs, 3) : nullptr;
    if (axes_input) {
      for (int64_t axis : read_int_values(*axes_input)) axes.push_back(normalized_axis(spec_, axis, rank));
    } else {
      for (int64_t k = 0; k < rank; ++k) axes.push_back(k);
    }
    if (pads.size() != 2 * axes.size()) {
      fail("pads " + sizes_to_string(pads) + " has " + std::to_string(pads.size()) + " entries, expected " +
           std::to_string(2 * axes.size()) + " (a begin and an end for each of " + std::to_string(axes.size()) +
           " axes; input sizes " + sizes_to_string(in) + ")");
    }
    std::vector<int64_t> begins(rank, 0), sizes = in;
    for (size_t j = 0; j < axes.size(); ++j) {
      begins[axes[j]] = pads[j];
      sizes[axes[j]] += pads[j] + pads[j + axes.size()];
      if (sizes[axes[j]] < 0)
        fail("pads " + sizes_to_string(pads) + " crop input sizes " + sizes_to_string(in) + " below zero");
    }
    require_output_sizes(outputs[0], sizes);

    const TensorView* given_constant = from_inputs ? optional_input(inputs, 2) : nullptr;
    const TensorView constant =
        given_constant && given_constant->numel() > 0 ? *given_constant : TensorView::of(constant_);
    for_each_pad_source(in, sizes, begins, mode_, [&](int64_t flat, int64_t source) {
      if (source < 0)
        copy_elements(constant, 0, outputs[0], flat, 1);
      else
        copy_elements(data, source, outputs[0], flat, 1);
    });
  }

 private:
  PadMode mode_ = PadMode::Constant;
  std::string pads_attribute_ = "pads";
  Tensor constant_;  // zero, or the `value` attribute before opset 11, in the data's dtype
};

}  // namespace

void register_reference_pad_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Pad", kFixedSizeDTypes, make_kernel<PadKernel>));
}

}  // namespace onnxtrain
