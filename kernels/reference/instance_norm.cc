// InstanceNormalization: each (n, c) plane of X (N,C,D1..Dn) normalised by its own mean and population
// variance, then scale[c]·x̂ + B[c].
#include <cmath>

#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

struct InstanceNormGeometry {
  int64_t batch = 0, channels = 0, plane = 0;
  double epsilon = 1e-5;
};

template <typename T>
void instance_norm(const InstanceNormGeometry& g, std::span<const TensorView> inputs,
                   std::span<const TensorView> outputs) {
  const T* x = inputs[0].as<const T>();
  const T* scale = inputs[1].as<const T>();
  const T* bias = inputs[2].as<const T>();
  T* y = outputs[0].as<T>();
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t c = 0; c < g.channels; ++c) {
      const int64_t base = (n * g.channels + c) * g.plane;
      double sum = 0;
      for (int64_t i = 0; i < g.plane; ++i) sum += static_cast<double>(x[base + i]);
      const double mean = sum / static_cast<double>(g.plane);
      double squares = 0;
      for (int64_t i = 0; i < g.plane; ++i) squares += std::pow(static_cast<double>(x[base + i]) - mean, 2);
      const double inv_std = 1.0 / std::sqrt(squares / static_cast<double>(g.plane) + g.epsilon);
      for (int64_t i = 0; i < g.plane; ++i) {
        y[base + i] =
            static_cast<T>(static_cast<double>(scale[c]) * (static_cast<double>(x[base + i]) - mean) * inv_std +
                           static_cast<double>(bias[c]));
      }
    }
  }
}

std::unique_ptr<Kernel> make_instance_norm(const KernelSpec& spec) {
  const DType dtype = require_same_float_dtype(spec, {0, 1, 2});
  const std::vector<int64_t>& x = spec.inputs[0].sizes;
  if (x.size() < 3)
    kernel_fail(spec, "X must be (N,C,D1,...) with at least one spatial dim, got " + sizes_to_string(x));
  const std::vector<int64_t> per_channel{x[1]};
  if (require_input(spec, 1, "scale").sizes != per_channel || require_input(spec, 2, "B").sizes != per_channel) {
    kernel_fail(spec, "scale " + sizes_to_string(spec.inputs[1].sizes) + " and B " +
                          sizes_to_string(spec.inputs[2].sizes) + " must have one value per channel of X " +
                          sizes_to_string(x));
  }
  if (require_output(spec, 0, "Y").sizes != x) kernel_fail(spec, "Y must have X's shape " + sizes_to_string(x));
  InstanceNormGeometry g{x[0], x[1], product_of(x, 2), spec.attributes.get_float("epsilon", 1e-5)};
  return make_float_kernel(spec, dtype, [&](auto zero) {
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
