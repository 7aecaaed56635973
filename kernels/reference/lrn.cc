// LRN across channels of X (N,C,D1..Dn): y = x / (bias + alpha/size · Σ x²)^beta, the sum over channels
// c - floor((size-1)/2) .. c + ceil((size-1)/2) that exist.
#include <algorithm>
#include <cmath>

#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <typename T>
void lrn(const LrnGeometry& g, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  const T* x = inputs[0].as<const T>();
  T* y = outputs[0].as<T>();
  const int64_t before = g.before(), after = g.after();
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t c = 0; c < g.channels; ++c) {
      for (int64_t i = 0; i < g.plane; ++i) {
        double squares = 0;
        for (int64_t j = std::max<int64_t>(0, c - before); j <= std::min(g.channels - 1, c + after); ++j) {
          const double v = static_cast<double>(x[(n * g.channels + j) * g.plane + i]);
          squares += v * v;
        }
        const int64_t e = (n * g.channels + c) * g.plane + i;
        const double scale = g.bias + g.alpha / static_cast<double>(g.size) * squares;
        y[e] = static_cast<T>(static_cast<double>(x[e]) / std::pow(scale, g.beta));
      }
    }
  }
}

std::unique_ptr<Kernel> make_lrn(const KernelSpec& spec) {
  const DType dtype = require_same_float_dtype(spec, {0});
  const std::vector<int64_t>& x = spec.inputs[0].sizes;
  const LrnGeometry g = read_lrn_geometry(spec, x);
  if (require_output(spec, 0, "Y").sizes != x) kernel_fail(spec, "Y must have X's shape " + sizes_to_string(x));
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { lrn<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_lrn_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("LRN", kFloatDTypes, &make_lrn));
}

}  // namespace onnxtrain
