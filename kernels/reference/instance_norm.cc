// InstanceNormalization: each (n, c) plane of X (N,C,D1..Dn) normalised by its own mean and population
// variance, then scale[c]·x̂ + B[c].
#include <cmath>

#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <typename T>
void instance_norm(const PlaneGeometry& g, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  const T* x = inputs[0].as<const T>();
  const T* scale = inputs[1].as<const T>();
  const T* bias = inputs[2].as<const T>();
  T* y = outputs[0].as<T>();
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t c = 0; c < g.channels; ++c) {
      const int64_t base = (n * g.channels + c) * g.plane;
      const auto [mean, inv_std] = moments_of(x + base, g.plane, g.epsilon);
      for (int64_t i = 0; i < g.plane; ++i) {
        y[base + i] =
            static_cast<T>(static_cast<double>(scale[c]) * (static_cast<double>(x[base + i]) - mean) * inv_std +
                           static_cast<double>(bias[c]));
      }
    }
  }
}

std::unique_ptr<Kernel> make_instance_norm(const KernelSpec& spec) {
  const auto checked = check_instance_norm(spec);
  const PlaneGeometry& g = checked.geometry;
  return make_float_kernel(spec, checked.dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { instance_norm<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_instance_norm_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("InstanceNormalization", kFloatDTypes, &make_instance_norm));
}

}  // namespace onnxtrain
