// GatherNDGrad (ai.onnxtrain): dX = zeros shaped x_shape, then dX[batch, row(j), :] += dY[batch, j, :] for
// every index row j in order (gather_nd_index.h), so repeated rows accumulate in a fixed order.
#include <algorithm>

#include "kernels/reference/gather_nd_index.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class GatherNDGradKernel : public DataMovementKernel {
 public:
  explicit GatherNDGradKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    dtype_ = require_shape_grad_inputs(spec, 3, {"dY", "x_shape", "indices"});
    layout_ = gather_nd_layout(spec, spec.outputs[0].sizes, spec.inputs[2].sizes);
    if (spec.inputs[0].sizes != layout_.out_sizes) {
      fail("dY has sizes " + sizes_to_string(spec.inputs[0].sizes) + ", expected " +
           sizes_to_string(layout_.out_sizes));
    }
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &dy = inputs[0], &dx = outputs[0];
    require_x_shape(inputs[1], dx);
    const std::vector<int64_t> rows = gather_nd_rows(spec_, layout_, inputs[2]);
    const GatherNDLayout& l = layout_;
    dispatch_float(dtype_, [&](auto zero) {
      using T = decltype(zero);
      const T* from = dy.as<const T>();
      T* to = dx.as<T>();
      std::fill(to, to + dx.numel(), T(0));
      for (int64_t j = 0; j < static_cast<int64_t>(rows.size()); ++j) {
        T* slice = to + (j / l.count * l.rows + rows[j]) * l.inner;
        for (int64_t i = 0; i < l.inner; ++i) slice[i] += from[j * l.inner + i];
      }
    });
  }

 private:
  DType dtype_ = DType::Undefined;
  GatherNDLayout layout_;
};

}  // namespace

void register_reference_gather_nd_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("GatherNDGrad", kFloatDTypes, make_kernel<GatherNDGradKernel>));
}

}  // namespace onnxtrain
