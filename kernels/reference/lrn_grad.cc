// Reference kernel of LRNGrad(dY, X) -> dX (domain ai.onnxtrain), float32/float64, LRN across channels
// of X (N,C,D1..Dn) as in lrn.cc: with s_c = bias + alpha/size · Σ_{j∈W(c)} x_j², W(c) = c − floor((size−1)/2)
// .. c + ceil((size−1)/2), dx_j = dy_j · s_j^-β − 2β·alpha/size · x_j · Σ_{c: j∈W(c)} dy_c · x_c · s_c^(-β-1).
#include <algorithm>
#include <cmath>

#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <typename T>
void lrn_grad(const LrnGeometry& g, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  const T* dy = inputs[0].as<const T>();
  const T* x = inputs[1].as<const T>();
  T* dx = outputs[0].as<T>();
  const int64_t before = g.before(), after = g.after();
  const double a = g.alpha / static_cast<double>(g.size);
  const int64_t C = g.channels;
  std::vector<double> xs(C), scale(C), t(C);  // one (n, i) column: x, s_c, dy_c·x_c·s_c^(-β-1)
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t i = 0; i < g.plane; ++i) {
      auto at = [&](int64_t c) { return (n * C + c) * g.plane + i; };
      for (int64_t c = 0; c < C; ++c) xs[c] = static_cast<double>(x[at(c)]);
      for (int64_t c = 0; c < C; ++c) {
        double squares = 0;
        for (int64_t j = std::max<int64_t>(0, c - before); j <= std::min(C - 1, c + after); ++j) {
          squares += xs[j] * xs[j];
        }
        scale[c] = g.bias + a * squares;
        t[c] = static_cast<double>(dy[at(c)]) * xs[c] * std::pow(scale[c], -g.beta - 1);
      }
      for (int64_t j = 0; j < C; ++j) {
        double sum = 0;  // over the channels c whose window holds j: c in j − after .. j + before
        for (int64_t c = std::max<int64_t>(0, j - after); c <= std::min(C - 1, j + before); ++c) sum += t[c];
        const double d = static_cast<double>(dy[at(j)]) * std::pow(scale[j], -g.beta) - 2 * g.beta * a * xs[j] * sum;
        dx[at(j)] = static_cast<T>(d);
      }
    }
  }
}

std::unique_ptr<Kernel> make_lrn_grad(const KernelSpec& spec) {
  require_input_count(spec, 2, 2);
  const DType dtype = require_same_float_dtype(spec, {0, 1});
  const std::vector<int64_t>& x = spec.inputs[1].sizes;
  const LrnGeometry g = read_lrn_geometry(spec, x);
  if (spec.inputs[0].sizes != x) kernel_fail(spec, "dY must have X's shape " + sizes_to_string(x));
  require_output(spec, 0, dtype, x);
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { lrn_grad<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_lrn_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("LRNGrad", kFloatDTypes, &make_lrn_grad));
}

}  // namespace onnxtrain
