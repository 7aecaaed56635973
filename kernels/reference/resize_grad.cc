// ResizeGrad (ai.onnxtrain): dX[i] gathers every dY element whose taps read element i, times the taps'
// weight product (kernels/resize_gather.h); its sizes are x_shape.
#include "kernels/reference/reference_kernels.h"
#include "kernels/resize_plan.h"

namespace onnxtrain {

namespace {

using namespace reference;

class ResizeGradKernel : public DataMovementKernel {
 public:
  explicit ResizeGradKernel(const KernelSpec& spec) : DataMovementKernel(spec), sampling_(resize_sampling_of(spec)) {
    dtype_ = require_shape_grad_inputs(spec, 2, {"dY", "x_shape"});
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &dy = inputs[0], &dx = outputs[0];
    require_x_shape(inputs[1], dx);
    const ResizePlan plan = plan_resize(spec_, sampling_, dx.sizes, inputs);
    if (plan.output_sizes() != dy.sizes)
      fail("dY has sizes " + sizes_to_string(dy.sizes) + ", the resize gives " + sizes_to_string(plan.output_sizes()));
    dispatch_float(dtype_, [&](auto zero) {
      using T = decltype(zero);
      const int64_t n = dx.numel();
      for (int64_t i = 0; i < n; ++i) {
        dx.as<T>()[i] =
            resize_gradient(plan.geometry, plan.tables.taps.data(), plan.tables.reach.data(), dy.as<const T>(), i);
      }
    });
  }

 private:
  ResizeSampling sampling_;
  DType dtype_ = DType::Undefined;
};

}  // namespace

void register_reference_resize_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("ResizeGrad", kFloatDTypes, make_kernel<ResizeGradKernel>));
}

}  // namespace onnxtrain
