// Reference kernel of ai.onnxtrain::ActivationGrad(dY, X[, dY2]) -> dX = (dY + dY2) * f'(X), float32/float64: a loop
// over the derivative functors of kernels/elementwise_derivatives.h (which the CUDA kernel shares).
#include "kernels/elementwise_derivatives.h"
#include "kernels/reference/kernel_plumbing.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;
using derivatives::Activation;

std::unique_ptr<Kernel> make_activation_grad(const KernelSpec& spec) {
  require_input_count(spec, 2, 3);
  const bool second_part = spec.inputs.size() > 2 && spec.inputs[2].present();
  const DType dtype = require_dtype_in(spec, 0, kFloatDTypes);
  require_input(spec, 1, "X");
  require_same_dtype(spec, 1, 0);
  const std::vector<int64_t>& sizes = spec.inputs[1].sizes;
  if (spec.inputs[0].sizes != sizes) {
    kernel_fail(spec, "dY of sizes " + sizes_to_string(spec.inputs[0].sizes) + " does not match X of sizes " +
                          sizes_to_string(sizes));
  }
  if (second_part) {
    require_same_dtype(spec, 2, 0);
    if (spec.inputs[2].sizes != sizes)
      kernel_fail(spec, "dY2 of sizes " + sizes_to_string(spec.inputs[2].sizes) + " does not match X of sizes " +
                            sizes_to_string(sizes));
  }
  require_output(spec, 0, dtype, sizes);
  const std::string name = spec.attributes.get_string("activation", "");
  const std::optional<Activation> activation = derivatives::activation_from_name(name);
  if (!activation) kernel_fail(spec, "activation '" + name + "' is not one ActivationGrad differentiates");
  const std::string approximate = spec.attributes.get_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh") {
    kernel_fail(spec, "approximate must be 'none' or 'tanh', got '" + approximate + "'");
  }
  const derivatives::ActivationParams params = derivatives::activation_params(*activation, spec.attributes);
  return make_closure_kernel([dtype, a = *activation, params, second_part](auto inputs, auto outputs) {
    dispatch_float(dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* dy = inputs[0].template as<T>();
      const T* x = inputs[1].template as<T>();
      const T* dy2 = second_part ? inputs[2].template as<T>() : nullptr;
      T* dx = outputs[0].template as<T>();
      const int64_t n = outputs[0].numel();
      derivatives::with_activation_grad<T>(a, params, [&](auto grad) {
        for (int64_t i = 0; i < n; ++i) dx[i] = grad(dy2 ? dy[i] + dy2[i] : dy[i], x[i]);
      });
    });
  });
}

}  // namespace

void register_reference_activation_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("ActivationGrad", kFloatDTypes, &make_activation_grad));
}

}  // namespace onnxtrain
