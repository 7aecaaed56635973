// Slice (opset 1: starts/ends/axes attributes; 10: inputs plus steps; 11: negative axes; 13). Starts and
// ends clamp like numpy slicing, also for negative steps; the int inputs are read at run time.
#include <algorithm>
#include <climits>

#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"
#include "kernels/reference/slice_view.h"

namespace onnxtrain {

namespace {

using namespace reference;

class SliceKernel : public DataMovementKernel {
 public:
  explicit SliceKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 1);
    require_output_dtype(spec, 0, spec.inputs[0].dtype);
    if (spec.opset < kSliceInputsSince) {
      if (!spec.attributes.has("starts") || !spec.attributes.has("ends"))
        fail("the starts and ends attributes are required");
      return;
    }
    require_inputs(spec, 3);
    static const char* kNames[] = {"data", "starts", "ends", "axes", "steps"};
    for (size_t i = 1; i < 5; ++i)
      if (has_input(spec, i)) require_index_input(spec, i, kNames[i]);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView& data = inputs[0];
    const bool from_attributes = spec_.opset < kSliceInputsSince;
    const Attributes& attrs = spec_.attributes;
    std::vector<int64_t> starts = from_attributes ? attrs.get_ints("starts") : read_int_values(inputs[1]);
    std::vector<int64_t> ends = from_attributes ? attrs.get_ints("ends") : read_int_values(inputs[2]);
    std::vector<int64_t> axes, steps(starts.size(), 1);
    const TensorView* axes_input = from_attributes ? nullptr : optional_input(inputs, 3);
    if (from_attributes && attrs.has("axes")) {
      axes = attrs.get_ints("axes");
    } else if (axes_input) {
      axes = read_int_values(*axes_input);
    } else {
      for (size_t j = 0; j < starts.size(); ++j) axes.push_back(static_cast<int64_t>(j));
    }
    if (const TensorView* steps_input = from_attributes ? nullptr : optional_input(inputs, 4))
      steps = read_int_values(*steps_input);
    const SliceView v = slice_view(spec_, data.sizes, starts, ends, axes, steps);
    require_output_sizes(outputs[0], v.sizes);
    copy_strided(data, v.base, v.strides, outputs[0]);
  }
};

}  // namespace

void register_reference_slice_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Slice", kFixedSizeDTypes, make_kernel<SliceKernel>));
}

}  // namespace onnxtrain
