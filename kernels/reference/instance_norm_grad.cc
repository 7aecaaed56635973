// ai.onnxtrain::InstanceNormalizationGrad(dY, X, scale) → dX, dScale, dBias, each optional: per (n, c)
// plane of X (N,C,D1..Dn) with its own mean and population variance, dx = scale·inv_std·(dy − mean(dy) −
// x̂·mean(dy·x̂)); dScale = Σ dy·x̂ and dBias = Σ dy over batch and plane.
#include <cmath>

#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <typename T>
void instance_norm_grad(const PlaneGeometry& g, std::span<const TensorView> inputs,
                        std::span<const TensorView> outputs) {
  const T* dy = inputs[0].as<const T>();
  const T* x = inputs[1].as<const T>();
  const T* scale = inputs[2].as<const T>();
  T* dx = has_view(outputs, 0) ? outputs[0].as<T>() : nullptr;
  std::vector<double> dscale(static_cast<size_t>(g.channels)), dbias(static_cast<size_t>(g.channels));
  const double count = static_cast<double>(g.plane);
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t c = 0; c < g.channels; ++c) {
      const int64_t base = (n * g.channels + c) * g.plane;
      const auto [mean, inv_std] = moments_of(x + base, g.plane, g.epsilon);
      double sum_dy = 0, sum_dy_xhat = 0;
      for (int64_t i = 0; i < g.plane; ++i) {
        sum_dy += static_cast<double>(dy[base + i]);
        sum_dy_xhat += static_cast<double>(dy[base + i]) * (static_cast<double>(x[base + i]) - mean) * inv_std;
      }
      dbias[c] += sum_dy;
      dscale[c] += sum_dy_xhat;
      if (!dx) continue;
      const double factor = static_cast<double>(scale[c]) * inv_std;
      for (int64_t i = 0; i < g.plane; ++i) {
        const double xhat = (static_cast<double>(x[base + i]) - mean) * inv_std;
        dx[base + i] =
            static_cast<T>(factor * (static_cast<double>(dy[base + i]) - (sum_dy + xhat * sum_dy_xhat) / count));
      }
    }
  }
  if (has_view(outputs, 1)) store_doubles(outputs[1], dscale);
  if (has_view(outputs, 2)) store_doubles(outputs[2], dbias);
}

std::unique_ptr<Kernel> make_instance_norm_grad(const KernelSpec& spec) {
  const auto checked = check_instance_norm_grad(spec);
  const PlaneGeometry& g = checked.geometry;
  return make_float_kernel(spec, checked.dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { instance_norm_grad<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_instance_norm_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("InstanceNormalizationGrad", kFloatDTypes, &make_instance_norm_grad));
}

}  // namespace onnxtrain
