// "cuda" kernels of InstanceNormalization and ai.onnxtrain's InstanceNormalizationGrad, float32 and
// float64, checked at prepare as the reference checks them (kernels/reference/instance_norm.cc,
// instance_norm_grad.cc): X (N,C,D1..Dn) as N·C rows (planes) with scale and B per channel. Work in
// layer_norm.cu (the same row kernels as LayerNormalization, parameters per row).
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/norm_launch.h"
#include "kernels/cuda/reduce_loss_plumbing.h"
#include "kernels/reference/nn_common.h"

namespace onnxtrain {
namespace {

using namespace reference;

cuda::NormParams instance_params(const PlaneGeometry& g) {
  cuda::NormParams p;
  p.rows = g.batch * g.channels;
  p.cols = g.plane;
  p.epsilon = g.epsilon;
  p.per_row_affine = true;
  p.channels = g.channels;  // rows == 0 when it is 0: no row takes r % channels
  return p;
}

std::unique_ptr<Kernel> make_cuda_instance_norm(const KernelSpec& spec) {
  const auto checked = check_instance_norm(spec);
  const cuda::NormParams p = instance_params(checked.geometry);
  return cuda::make_float_launch_kernel(
      spec, checked.dtype, [p](auto zero, Stream& stream, cuda::Views in, cuda::Views out) {
        using T = decltype(zero);
        cuda::launch_norm<T>(p, in[0].as<const T>(), in[1].as<const T>(), in[2].as<const T>(), out[0].as<T>(), {},
                             cuda::native_stream(stream));
      });
}

std::unique_ptr<Kernel> make_cuda_instance_norm_grad(const KernelSpec& spec) {
  const auto checked = check_instance_norm_grad(spec);
  return cuda::make_norm_grad_kernel(spec, checked.dtype, instance_params(checked.geometry));
}

}  // namespace

void register_cuda_instance_norm_kernels(KernelRegistry& registry) {
  registry.add(cuda::cuda_kernel_entry("", "InstanceNormalization", kFloatDTypes, &make_cuda_instance_norm));
  registry.add(cuda::cuda_kernel_entry("ai.onnxtrain", "InstanceNormalizationGrad", kFloatDTypes,
                                       &make_cuda_instance_norm_grad));
}

}  // namespace onnxtrain
