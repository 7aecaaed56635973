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
  const DType dtype = require_same_float_dtype(spec, {0, 1, 2});
  const std::vector<int64_t>& x = spec.inputs[0].sizes;
  const PlaneGeometry g = read_plane_geometry(spec, x);
  const std::vector<int64_t> per_channel{x[1]};
  if (require_input(spec, 1, "scale").sizes != per_channel || require_input(spec, 2, "B").sizes != per_channel) {
    kernel_fail(spec, "scale " + sizes_to_string(spec.inputs[1].sizes) + " and B " +
                          sizes_to_string(spec.inputs[2].sizes) + " must have one value per channel of X " +
                          sizes_to_string(x));
  }
  if (require_output(spec, 0, "Y").sizes != x) kernel_fail(spec, "Y must have X's shape " + sizes_to_string(x));
  const cuda::NormParams p = instance_params(g);
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel([p](Stream& stream, std::span<const TensorView> in, std::span<const TensorView> out) {
      cuda::DeviceGuard guard(stream);
      cuda::launch_norm<T>(p, in[0].as<const T>(), in[1].as<const T>(), in[2].as<const T>(), out[0].as<T>(), {},
                           cuda::native_stream(stream));
    });
  });
}

std::unique_ptr<Kernel> make_cuda_instance_norm_grad(const KernelSpec& spec) {
  const DType dtype = require_same_float_dtype(spec, {0, 1, 2});
  const std::vector<int64_t>& x = require_input(spec, 1, "X").sizes;
  const PlaneGeometry g = read_plane_geometry(spec, x);
  if (spec.inputs[0].sizes != x) kernel_fail(spec, "dY must have X's shape " + sizes_to_string(x));
  const std::vector<int64_t> per_channel{x[1]};
  if (require_input(spec, 2, "scale").sizes != per_channel) {
    kernel_fail(spec, "scale " + sizes_to_string(spec.inputs[2].sizes) + " must have one value per channel of X " +
                          sizes_to_string(x));
  }
  if (has_output(spec, 0)) require_output(spec, 0, dtype, x);
  for (size_t i = 1; i < 3; ++i) {
    if (has_output(spec, i)) require_output(spec, i, dtype, per_channel);
  }
  const cuda::NormParams p = instance_params(g);
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

void register_cuda_instance_norm_kernels(KernelRegistry& registry) {
  registry.add(cuda_entry("", "InstanceNormalization", &make_cuda_instance_norm));
  registry.add(cuda_entry("ai.onnxtrain", "InstanceNormalizationGrad", &make_cuda_instance_norm_grad));
}

}  // namespace onnxtrain
