// GatherElementsGrad (ai.onnxtrain): dX = zeros shaped x_shape, then dX[target(p)] += dY[p] for every index
// position p in row-major order, target(p) being p with the coordinate along `axis` replaced by indices[p]
// (elements_index.h). One sequential pass, so repeated indices accumulate in a fixed order.
#include <algorithm>

#include "kernels/reference/elements_index.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class GatherElementsGradKernel : public DataMovementKernel {
 public:
  explicit GatherElementsGradKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    dtype_ = require_shape_grad_inputs(spec, 3, {"dY", "x_shape", "indices"});
    axis_ = elements_axis(spec, spec.outputs[0].sizes, spec.inputs[2].sizes);
    if (spec.inputs[0].sizes != spec.inputs[2].sizes) {
      fail("dY has sizes " + sizes_to_string(spec.inputs[0].sizes) + ", expected the indices' " +
           sizes_to_string(spec.inputs[2].sizes));
    }
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &dy = inputs[0], &dx = outputs[0];
    require_x_shape(inputs[1], dx);
    dispatch_float(dtype_, [&](auto zero) {
      using T = decltype(zero);
      const T* from = dy.as<const T>();
      T* to = dx.as<T>();
      std::fill(to, to + dx.numel(), T(0));
      for_each_element_target(spec_, dx.sizes, inputs[2], axis_,
                              [&](int64_t j, int64_t offset) { to[offset] += from[j]; });
    });
  }

 private:
  DType dtype_ = DType::Undefined;
  int64_t axis_ = 0;
};

}  // namespace

void register_reference_gather_elements_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("GatherElementsGrad", kFloatDTypes, make_kernel<GatherElementsGradKernel>));
}

}  // namespace onnxtrain
