// CUDA kernel of ai.onnxtrain::ActivationGrad(dY, X) -> dX = dY * f'(X), float32/float64: one
// grid-stride launch over the derivative functors of kernels/elementwise_derivatives.h, the same ones
// the reference kernel loops over on the CPU.
#include <optional>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise_launch.cuh"
#include "kernels/elementwise_derivatives.h"

namespace onnxtrain {
namespace cuda {
namespace {

using derivatives::Activation;
using reference::kernel_fail;

std::unique_ptr<Kernel> make_activation_grad(const KernelSpec& spec) {
  reference::require_input_count(spec, 2, 2);
  const DType dtype = require_cuda_dtype(spec, 0, kCudaFloatDTypes);
  reference::require_input(spec, 1, "X");
  reference::require_same_dtype(spec, 1, 0);
  const std::vector<int64_t>& sizes = spec.inputs[1].sizes;
  if (spec.inputs[0].sizes != sizes) {
    kernel_fail(spec, "dY of sizes " + reference::sizes_to_string(spec.inputs[0].sizes) +
                          " does not match X of sizes " + reference::sizes_to_string(sizes));
  }
  reference::require_output(spec, 0, dtype, sizes);
  const std::string name = spec.attributes.get_string("activation", "");
  const std::optional<Activation> activation = derivatives::activation_from_name(name);
  if (!activation) kernel_fail(spec, "activation '" + name + "' is not one ActivationGrad differentiates");
  const std::string approximate = spec.attributes.get_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh") {
    kernel_fail(spec, "approximate must be 'none' or 'tanh', got '" + approximate + "'");
  }
  const derivatives::ActivationParams params = derivatives::activation_params(*activation, spec.attributes);
  const BroadcastGeometry g = require_geometry(spec, sizes, {sizes, sizes});  // same sizes: a flat loop
  return make_cuda_kernel([dtype, a = *activation, params, g](cudaStream_t stream, auto inputs, auto outputs) {
    dispatch_cuda<false>(dtype, [&](auto zero) {
      using T = decltype(zero);
      derivatives::with_activation_grad<T>(a, params, [&](auto grad) {
        launch_broadcast2(stream, g, inputs[0].template as<const T>(), inputs[1].template as<const T>(),
                          outputs[0].template as<T>(), grad);
      });
    });
  });
}

}  // namespace
}  // namespace cuda

void register_cuda_activation_grad_kernels(KernelRegistry& registry) {
  registry.add(cuda::cuda_entry("ActivationGrad", cuda::kCudaFloatDTypes, &cuda::make_activation_grad, "ai.onnxtrain"));
}

}  // namespace onnxtrain
