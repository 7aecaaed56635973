// "cuda" kernels of Softmax and LogSoftmax and of ai.onnxtrain's SoftmaxGrad and LogSoftmaxGrad, float32
// and float64, checked at prepare as the reference checks them (kernels/reference/softmax.cc,
// softmax_grad.cc): before opset 13 the forward normalises over every dim from `axis` on (default 1),
// from 13 over `axis` alone (default -1); the grads over `axis` (default -1). Work in softmax.cu.
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/reduce_loss_plumbing.h"
#include "kernels/cuda/softmax_launch.h"
#include "kernels/reference/nn_common.h"

namespace onnxtrain {
namespace {

using namespace reference;

cuda::AxisGeometry axis_geometry(const SoftmaxGeometry& g) { return {g.outer, g.n, g.inner}; }

template <bool Log>
std::unique_ptr<Kernel> make_cuda_softmax(const KernelSpec& spec) {
  const auto checked = check_softmax(spec);
  const cuda::AxisGeometry g = axis_geometry(checked.geometry);
  return cuda::make_float_launch_kernel(
      spec, checked.dtype, [g](auto zero, Stream& stream, cuda::Views in, cuda::Views out) {
        using T = decltype(zero);
        cuda::launch_softmax<T>(Log, g, in[0].as<const T>(), out[0].as<T>(), cuda::native_stream(stream));
      });
}

template <bool Log>
std::unique_ptr<Kernel> make_cuda_softmax_grad(const KernelSpec& spec) {
  const auto checked = check_softmax_grad(spec);
  const cuda::AxisGeometry g = axis_geometry(checked.geometry);
  return cuda::make_float_launch_kernel(spec, checked.dtype,
                                        [g](auto zero, Stream& stream, cuda::Views in, cuda::Views out) {
                                          using T = decltype(zero);
                                          cuda::launch_softmax_grad<T>(Log, g, in[0].as<const T>(), in[1].as<const T>(),
                                                                       out[0].as<T>(), cuda::native_stream(stream));
                                        });
}

}  // namespace

void register_cuda_softmax_kernels(KernelRegistry& registry) {
  registry.add(cuda::cuda_kernel_entry("", "Softmax", kFloatDTypes, &make_cuda_softmax<false>));
  registry.add(cuda::cuda_kernel_entry("", "LogSoftmax", kFloatDTypes, &make_cuda_softmax<true>));
  registry.add(cuda::cuda_kernel_entry("ai.onnxtrain", "SoftmaxGrad", kFloatDTypes, &make_cuda_softmax_grad<false>));
  registry.add(cuda::cuda_kernel_entry("ai.onnxtrain", "LogSoftmaxGrad", kFloatDTypes, &make_cuda_softmax_grad<true>));
}

}  // namespace onnxtrain
