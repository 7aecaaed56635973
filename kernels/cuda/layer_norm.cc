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
  const DType dtype = require_same_float_dtype(spec, {0, 1, 2});
  const std::vector<int64_t>& x = spec.inputs[0].sizes;
  const auto rank = static_cast<int64_t>(x.size());
  int64_t axis = spec.attributes.get_int("axis", -1);
  if (axis < -rank || axis >= rank) {
    kernel_fail(spec, "axis " + std::to_string(axis) + " is out of range for X " + sizes_to_string(x));
  }
  if (axis < 0) axis += rank;
  if (require_output(spec, 0, "Y").sizes != x) kernel_fail(spec, "Y must have X's shape " + sizes_to_string(x));
  const std::vector<int64_t>& scale = require_input(spec, 1, "Scale").sizes;
  const LayerNormGeometry g = read_layer_norm_geometry(spec, x, axis, scale);
  cuda::NormParams p = layer_params(spec, g, scale);
  if (has_input(spec, 2)) {
    broadcast_offsets(spec, "B", spec.inputs[2].sizes, g.normalized);  // fails unless B broadcasts
    p.bias_index = column_index(spec, "B", spec.inputs[2].sizes, g.normalized);
  }
  std::vector<int64_t> stats = x;
  for (size_t i = static_cast<size_t>(axis); i < stats.size(); ++i) stats[i] = 1;
  bool stat_double[3] = {false, false, false};
  for (size_t i = 1; i < 3; ++i) {
    if (!has_output(spec, i)) continue;
    if (!is_float32_or_64(spec.outputs[i].dtype)) {
      kernel_fail(spec, "the CUDA kernel stashes Mean and InvStdDev as float32 or float64, got " +
                            std::string(dtype_name(spec.outputs[i].dtype)) + " (stash_type)");
    }
    if (spec.outputs[i].sizes != stats) {
      kernel_fail(spec, "output " + std::to_string(i) + " is " + sizes_to_string(spec.outputs[i].sizes) +
                            ", expected " + sizes_to_string(stats));
    }
    stat_double[i] = spec.outputs[i].dtype == DType::Float64;
  }
  const bool mean_double = stat_double[1], inv_std_double = stat_double[2];
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel([p, mean_double, inv_std_double](Stream& stream, std::span<const TensorView> in,
                                                                std::span<const TensorView> out) {
      cuda::DeviceGuard guard(stream);
      cuda::NormStats stats;
      stats.mean = has_view(out, 1) ? out[1].data : nullptr;
      stats.inv_std = has_view(out, 2) ? out[2].data : nullptr;
      stats.mean_double = mean_double;
      stats.inv_std_double = inv_std_double;
      const T* bias = has_view(in, 2) ? in[2].as<const T>() : nullptr;
      cuda::launch_norm<T>(p, in[0].as<const T>(), in[1].as<const T>(), bias, out[0].as<T>(), stats,
                           cuda::native_stream(stream));
    });
  });
}

std::unique_ptr<Kernel> make_cuda_layer_norm_grad(const KernelSpec& spec) {
  const DType dtype = require_same_float_dtype(spec, {0, 1, 2});
  const std::vector<int64_t>& x = require_input(spec, 1, "X").sizes;
  if (spec.inputs[0].sizes != x) kernel_fail(spec, "dY must have X's shape " + sizes_to_string(x));
  const int64_t axis = normalized_axis(spec, spec.attributes.get_int("axis", -1), static_cast<int64_t>(x.size()));
  const std::vector<int64_t>& scale = require_input(spec, 2, "Scale").sizes;
  const LayerNormGeometry g = read_layer_norm_geometry(spec, x, axis, scale);
  if (has_output(spec, 0)) require_output(spec, 0, dtype, x);
  for (size_t i = 1; i < 3; ++i) {
    if (has_output(spec, i)) require_output(spec, i, dtype, g.normalized);
  }
  const cuda::NormParams p = layer_params(spec, g, scale);
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel([p](Stream& stream, std::span<const TensorView> in, std::span<const TensorView> out) {
      cuda::DeviceGuard guard(stream);
      auto* scratch = static_cast<double*>(cuda::workspace(stream, cuda::norm_grad_scratch_bytes(p)));
      auto optional_out = [&](size_t i) { return has_view(out, i) ? out[i].as<T>() : nullptr; };
      cuda::launch_norm_grad<T>(p, in[0].as<const T>(), in[1].as<const T>(), in[2].as<const T>(), optional_out(0),
                                optional_out(1), optional_out(2), scratch, cuda::native_stream(stream));
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

void register_cuda_norm_kernels(KernelRegistry& registry) {
  registry.add(cuda_entry("", "LayerNormalization", &make_cuda_layer_norm));
  registry.add(cuda_entry("ai.onnxtrain", "LayerNormalizationGrad", &make_cuda_layer_norm_grad));
  register_cuda_instance_norm_kernels(registry);
}

}  // namespace onnxtrain
