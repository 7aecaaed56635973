// "cuda" kernels of LayerNormalization (opset 17) and ai.onnxtrain's LayerNormalizationGrad, float32 and
// float64, checked at prepare as the reference checks them (kernels/reference/layer_norm.cc,
// layer_norm_grad.cc): X as (outer, inner) rows split at `axis`, Scale and B broadcast onto the
// normalised dims, optional Mean and InvStdDev outputs in float32 or float64 (stash_type). Work in
// layer_norm.cu; register_cuda_norm_kernels also registers InstanceNormalization (instance_norm.cc).
#include <memory>
#include <optional>
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

cuda::BroadcastIndex column_index(const KernelSpec& spec, const std::string& what, const std::vector<int64_t>& sizes,
                                  const std::vector<int64_t>& normalized) {
  const std::optional<cuda::BroadcastIndex> index = cuda::make_broadcast_index(sizes, normalized);
  if (!index) {
    kernel_fail(spec, what + " " + sizes_to_string(sizes) + " onto " + sizes_to_string(normalized) +
                          " needs more than " + std::to_string(cuda::kMaxReduceDims) + " broadcast dims");
  }
  return *index;
}

cuda::NormParams layer_params(const KernelSpec& spec, const LayerNormGeometry& g, const std::vector<int64_t>& scale) {
  cuda::NormParams p;
  p.rows = g.outer;
  p.cols = g.inner;
  p.epsilon = g.epsilon;
  p.scale_index = column_index(spec, "Scale", scale, g.normalized);
  return p;
}

std::unique_ptr<Kernel> make_cuda_layer_norm(const KernelSpec& spec) {
  const auto checked = check_layer_norm(spec, "the CUDA kernel");
  const LayerNormGeometry& g = checked.geometry;
  const std::vector<int64_t>& scale = spec.inputs[1].sizes;
  cuda::NormParams p = layer_params(spec, g, scale);
  if (has_input(spec, 2)) p.bias_index = column_index(spec, "B", spec.inputs[2].sizes, g.normalized);
  const bool mean_double = has_output(spec, 1) && spec.outputs[1].dtype == DType::Float64;
  const bool inv_std_double = has_output(spec, 2) && spec.outputs[2].dtype == DType::Float64;
  return cuda::make_float_launch_kernel(
      spec, checked.dtype,
      [p, mean_double, inv_std_double](auto zero, Stream& stream, cuda::Views in, cuda::Views out) {
        using T = decltype(zero);
        cuda::NormStats stats;
        stats.mean = has_view(out, 1) ? out[1].data : nullptr;
        stats.inv_std = has_view(out, 2) ? out[2].data : nullptr;
        stats.mean_double = mean_double;
        stats.inv_std_double = inv_std_double;
        const T* bias = has_view(in, 2) ? in[2].as<const T>() : nullptr;
        cuda::launch_norm<T>(p, in[0].as<const T>(), in[1].as<const T>(), bias, out[0].as<T>(), stats,
                             cuda::native_stream(stream));
      });
}

std::unique_ptr<Kernel> make_cuda_layer_norm_grad(const KernelSpec& spec) {
  const auto checked = check_layer_norm_grad(spec);
  return cuda::make_norm_grad_kernel(spec, checked.dtype, layer_params(spec, checked.geometry, spec.inputs[2].sizes));
}

}  // namespace

namespace cuda {

std::unique_ptr<Kernel> make_norm_grad_kernel(const KernelSpec& spec, DType dtype, const NormParams& p) {
  return make_float_launch_kernel(spec, dtype, [p](auto zero, Stream& stream, Views in, Views out) {
    using T = decltype(zero);
    auto* scratch = static_cast<double*>(workspace(stream, norm_grad_scratch_bytes(p)));
    auto optional_out = [&](size_t i) { return reference::has_view(out, i) ? out[i].as<T>() : nullptr; };
    launch_norm_grad<T>(p, in[0].as<const T>(), in[1].as<const T>(), in[2].as<const T>(), optional_out(0),
                        optional_out(1), optional_out(2), scratch, native_stream(stream));
  });
}

}  // namespace cuda

void register_cuda_norm_kernels(KernelRegistry& registry) {
  registry.add(cuda::cuda_kernel_entry("", "LayerNormalization", kFloatDTypes, &make_cuda_layer_norm));
  registry.add(
      cuda::cuda_kernel_entry("ai.onnxtrain", "LayerNormalizationGrad", kFloatDTypes, &make_cuda_layer_norm_grad));
  register_cuda_instance_norm_kernels(registry);
}

}  // namespace onnxtrain
