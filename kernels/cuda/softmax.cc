// "cuda" kernels of Softmax and LogSoftmax and of ai.onnxtrain's SoftmaxGrad and LogSoftmaxGrad, float32
// and float64, checked at prepare as the reference checks them (kernels/reference/softmax.cc,
// softmax_grad.cc): before opset 13 the forward normalises over every dim from `axis` on (default 1),
// from 13 over `axis` alone (default -1); the grads over `axis` (default -1). Work in softmax.cu.
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/softmax_launch.h"
#include "kernels/reference/nn_common.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <bool Log>
std::unique_ptr<Kernel> make_cuda_softmax(const KernelSpec& spec) {
  require_input_count(spec, 1, 1);
  const DType dtype = require_dtype_in(spec, 0, kFloatDTypes);
  const std::vector<int64_t>& sizes = spec.inputs[0].sizes;
  const auto rank = static_cast<int64_t>(sizes.size());
  if (rank == 0) kernel_fail(spec, "input must have at least one dim, got a scalar");
  require_output(spec, 0, dtype, sizes);
  const bool coerce_to_2d = spec.opset < 13;
  const int64_t axis = normalized_axis(spec, spec.attributes.get_int("axis", coerce_to_2d ? 1 : -1), rank);
  cuda::AxisGeometry g;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) {
      g.outer *= sizes[d];
    } else if (d == axis || coerce_to_2d) {
      g.n *= sizes[d];
    } else {
      g.inner *= sizes[d];
    }
  }
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel([g](Stream& stream, std::span<const TensorView> in, std::span<const TensorView> out) {
      cuda::DeviceGuard guard(stream);
      cuda::launch_softmax<T>(Log, g, in[0].as<const T>(), out[0].as<T>(), cuda::native_stream(stream));
    });
  });
}

template <bool Log>
std::unique_ptr<Kernel> make_cuda_softmax_grad(const KernelSpec& spec) {
  require_input_count(spec, 2, 2);
  const DType dtype = require_same_float_dtype(spec, {0, 1});
  const std::vector<int64_t>& sizes = spec.inputs[1].sizes;
  if (spec.inputs[0].sizes != sizes) {
    kernel_fail(spec, "dY " + sizes_to_string(spec.inputs[0].sizes) + " must have Y's shape " + sizes_to_string(sizes));
  }
  const auto rank = static_cast<int64_t>(sizes.size());
  if (rank == 0) kernel_fail(spec, "Y must have at least one dim, got a scalar");
  require_output(spec, 0, dtype, sizes);
  const int64_t axis = normalized_axis(spec, spec.attributes.get_int("axis", -1), rank);
  const cuda::AxisGeometry g{product_of(sizes, 0, axis), sizes[axis], product_of(sizes, axis + 1)};
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel([g](Stream& stream, std::span<const TensorView> in, std::span<const TensorView> out) {
      cuda::DeviceGuard guard(stream);
      cuda::launch_softmax_grad<T>(Log, g, in[0].as<const T>(), in[1].as<const T>(), out[0].as<T>(),
                                   cuda::native_stream(stream));
    });
  });
}

KernelEntry cuda_entry(std::string domain, std::string op_type, KernelFactory factory) {
  return {.domain = std::move(domain),
          .op_type = std::move(op_type),
          .device = DeviceKind::Cuda,
          .dtypes = kFloatDTypes,
          .implementation = "cuda",
          .factory = factory};
}

}  // namespace

void register_cuda_softmax_kernels(KernelRegistry& registry) {
  registry.add(cuda_entry("", "Softmax", &make_cuda_softmax<false>));
  registry.add(cuda_entry("", "LogSoftmax", &make_cuda_softmax<true>));
  registry.add(cuda_entry("ai.onnxtrain", "SoftmaxGrad", &make_cuda_softmax_grad<false>));
  registry.add(cuda_entry("ai.onnxtrain", "LogSoftmaxGrad", &make_cuda_softmax_grad<true>));
}

}  // namespace onnxtrain
