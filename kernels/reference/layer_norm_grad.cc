// ai.onnxtrain::LayerNormalizationGrad(dY, X, Scale) → dX, dScale, dBias, each optional: X viewed as
// (outer, inner) at `axis`, each row with its own mean and population variance. With g = dy·Scale
// (Scale broadcast onto the normalised dims): dx = inv_std·(g − mean(g) − x̂·mean(g·x̂)); dScale = Σ dy·x̂ and
// dBias = Σ dy over the rows, shaped like the normalised dims (the rule sums them down to Scale/B).
#include <cmath>

#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <typename T>
void layer_norm_grad(const LayerNormGeometry& g, std::span<const TensorView> inputs,
                     std::span<const TensorView> outputs) {
  const T* dy = inputs[0].as<const T>();
  const T* x = inputs[1].as<const T>();
  const T* scale = inputs[2].as<const T>();
  T* dx = has_view(outputs, 0) ? outputs[0].as<T>() : nullptr;
  std::vector<double> dscale(static_cast<size_t>(g.inner)), dbias(static_cast<size_t>(g.inner));
  std::vector<double> xhat(static_cast<size_t>(g.inner));
  const double count = static_cast<double>(g.inner);
  for (int64_t r = 0; r < g.outer; ++r) {
    const T* xr = x + r * g.inner;
    const T* dyr = dy + r * g.inner;
    const auto [mean, inv_std] = moments_of(xr, g.inner, g.epsilon);
    double sum_g = 0, sum_g_xhat = 0;
    for (int64_t i = 0; i < g.inner; ++i) {
      xhat[i] = (static_cast<double>(xr[i]) - mean) * inv_std;
      const double d = static_cast<double>(dyr[i]);
      const double gi = d * static_cast<double>(scale[g.scale_offsets[i]]);
      sum_g += gi;
      sum_g_xhat += gi * xhat[i];
      dscale[i] += d * xhat[i];
      dbias[i] += d;
    }
    if (!dx) continue;
    for (int64_t i = 0; i < g.inner; ++i) {
      const double gi = static_cast<double>(dyr[i]) * static_cast<double>(scale[g.scale_offsets[i]]);
      dx[r * g.inner + i] = static_cast<T>(inv_std * (gi - (sum_g + xhat[i] * sum_g_xhat) / count));
    }
  }
  if (has_view(outputs, 1)) store_doubles(outputs[1], dscale);
  if (has_view(outputs, 2)) store_doubles(outputs[2], dbias);
}

std::unique_ptr<Kernel> make_layer_norm_grad(const KernelSpec& spec) {
  const auto checked = check_layer_norm_grad(spec);
  const LayerNormGeometry& g = checked.geometry;
  return make_float_kernel(spec, checked.dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { layer_norm_grad<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_layer_norm_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("LayerNormalizationGrad", kFloatDTypes, &make_layer_norm_grad));
}

}  // namespace onnxtrain
