// GatherElements (opset 11, 13): out[p] = data[p with the coordinate along `axis` replaced by indices[p]]
// (elements_index.h). The output has the indices' sizes; any fixed-size dtype moves as bytes. An index
// outside [-n, n) is bad data: run() throws Error naming it.
#include "kernels/reference/elements_index.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class GatherElementsKernel : public DataMovementKernel {
 public:
  explicit GatherElementsKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 2);
    require_index_input(spec, 1, "indices");
    axis_ = elements_axis(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
    require_output(spec, 0, spec.inputs[0].dtype, spec.inputs[1].sizes);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &data = inputs[0], &out = outputs[0];
    for_each_element_target(spec_, data.sizes, inputs[1], axis_,
                            [&](int64_t j, int64_t offset) { copy_elements(data, offset, out, j, 1); });
  }

 private:
  int64_t axis_ = 0;
};

}  // namespace

void register_reference_gather_elements_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("GatherElements", kFixedSizeDTypes, make_kernel<GatherElementsKernel>));
}

}  // namespace onnxtrain
