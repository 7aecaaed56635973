// Resize (opsets 10-19) and Upsample (7, 9): every output element from its taps (kernels/resize_gather.h),
// over float32 and float64. The tables are made per run from the scales or sizes the run gives.
#include "kernels/reference/reference_kernels.h"
#include "kernels/resize_plan.h"

namespace onnxtrain {

namespace {

using namespace reference;

class ResizeKernel : public DataMovementKernel {
 public:
  explicit ResizeKernel(const KernelSpec& spec) : DataMovementKernel(spec), sampling_(resize_sampling_of(spec)) {
    require_inputs(spec, 1);
    dtype_ = require_dtype_in(spec, 0, kFloatDTypes);
    require_output_dtype(spec, 0, dtype_);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const ResizePlan plan = plan_resize(spec_, sampling_, inputs[0].sizes, inputs);
    require_output_sizes(outputs[0], plan.output_sizes());
    dispatch_float(dtype_, [&](auto zero) {
      using T = decltype(zero);
      const T* x = inputs[0].as<const T>();
      T* y = outputs[0].as<T>();
      const int64_t n = outputs[0].numel();
      for (int64_t i = 0; i < n; ++i)
        y[i] = resize_value(plan.geometry, plan.tables.taps.data(), x, i, sampling_.extrapolation_value);
    });
  }

 private:
  ResizeSampling sampling_;
  DType dtype_ = DType::Undefined;
};

}  // namespace

void register_reference_resize_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Resize", kFloatDTypes, make_kernel<ResizeKernel>));
  registry.add(reference_entry("Upsample", kFloatDTypes, make_kernel<ResizeKernel>));
}

}  // namespace onnxtrain
