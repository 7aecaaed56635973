// ScatterElements (opset 11, 13, 16, 18): out = data, then for every index position p in row-major order
// out[target(p)] = updates[p] (reduction none; bytes, any fixed-size dtype) or out[target(p)] = op(out[...],
// updates[p]) for add, mul, max, min (arithmetic dtypes), target(p) being p with the coordinate along
// `axis` replaced by indices[p] (elements_index.h). Repeated indices apply in that order, so under "none"
// the last write wins. An index outside [-n, n) is bad data: run() throws Error naming it.
#include <algorithm>

#include "kernels/reference/elements_index.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class ScatterElementsKernel : public DataMovementKernel {
 public:
  explicit ScatterElementsKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 3);
    require_index_input(spec, 1, "indices");
    require_same_dtype(spec, 2, 0);
    if (spec.inputs[2].sizes != spec.inputs[1].sizes) {
      fail("updates " + sizes_to_string(spec.inputs[2].sizes) + " must have the sizes of indices " +
           sizes_to_string(spec.inputs[1].sizes));
    }
    axis_ = elements_axis(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
    reduction_ = scatter_reduction(spec);
    require_output(spec, 0, spec.inputs[0].dtype, spec.inputs[0].sizes);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &data = inputs[0], &updates = inputs[2], &out = outputs[0];
    copy_elements(data, 0, out, 0, data.numel());
    if (reduction_ == ScatterReduction::None) {
      for_each_element_target(spec_, data.sizes, inputs[1], axis_,
                              [&](int64_t j, int64_t offset) { copy_elements(updates, j, out, offset, 1); });
      return;
    }
    dispatch_arithmetic(data.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* from = updates.as<const T>();
      T* to = out.as<T>();
      for_each_element_target(spec_, data.sizes, inputs[1], axis_, [&](int64_t j, int64_t offset) {
        to[offset] = scatter_combine(reduction_, to[offset], from[j]);
      });
    });
  }

 private:
  int64_t axis_ = 0;
  ScatterReduction reduction_ = ScatterReduction::None;
};

}  // namespace

void register_reference_scatter_elements_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("ScatterElements", kFixedSizeDTypes, make_kernel<ScatterElementsKernel>));
}

}  // namespace onnxtrain
