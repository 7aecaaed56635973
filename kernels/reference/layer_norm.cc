// LayerNormalization (opset 17): X viewed as (outer, inner) at `axis`; each row normalised by its mean
// and population variance, then x̂·Scale + B with Scale and B broadcast onto X's dims from `axis` on.
// Optional outputs Mean and InvStdDev (1/sqrt(var + epsilon)) have X's leading dims and 1s after, in the
// stash_type dtype (float32 or float64 here). The statistics are computed in double whatever stash_type
// says: the reference is at least as precise as the spec's stash precision.
#include <cmath>

#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <typename T>
void layer_norm(const LayerNormGeometry& g, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  const T* x = inputs[0].as<const T>();
  const T* scale = inputs[1].as<const T>();
  const T* bias = g.bias_offsets.empty() || !has_view(inputs, 2) ? nullptr : inputs[2].as<const T>();
  T* y = outputs[0].as<T>();
  std::vector<double> means(static_cast<size_t>(g.outer)), inv_stds(static_cast<size_t>(g.outer));
  for (int64_t r = 0; r < g.outer; ++r) {
    const T* row = x + r * g.inner;
    const auto [mean, inv_std] = moments_of(row, g.inner, g.epsilon);
    for (int64_t i = 0; i < g.inner; ++i) {
      double v = (static_cast<double>(row[i]) - mean) * inv_std * static_cast<double>(scale[g.scale_offsets[i]]);
      if (bias) v += static_cast<double>(bias[g.bias_offsets[i]]);
      y[r * g.inner + i] = static_cast<T>(v);
    }
    means[r] = mean;
    inv_stds[r] = inv_std;
  }
  if (has_view(outputs, 1)) store_doubles(outputs[1], means);
  if (has_view(outputs, 2)) store_doubles(outputs[2], inv_stds);
}

std::unique_ptr<Kernel> make_layer_norm(const KernelSpec& spec) {
  const auto checked = check_layer_norm(spec, "the reference kernel");
  const LayerNormGeometry& g = checked.geometry;
  return make_float_kernel(spec, checked.dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { layer_norm<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_layer_norm_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("LayerNormalization", kFloatDTypes, &make_layer_norm));
}

}  // namespace onnxtrain
