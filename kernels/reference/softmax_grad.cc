// Reference kernels of SoftmaxGrad and LogSoftmaxGrad(dY, Y) -> dX (domain ai.onnxtrain), float32/float64,
// over one axis (attribute axis, default -1), the tensors viewed as (outer, n, inner):
// SoftmaxGrad dX = Y ⊙ (dY − Σ_n dY ⊙ Y), LogSoftmaxGrad dX = dY − exp(Y) ⊙ Σ_n dY. Sums are in double.
#include <cmath>

#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <bool Log>
std::unique_ptr<Kernel> make_softmax_grad(const KernelSpec& spec) {
  const auto checked = check_softmax_grad(spec);
  const SoftmaxGeometry& g = checked.geometry;
  return make_float_kernel(spec, checked.dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel([g](std::span<const TensorView> in, std::span<const TensorView> out) {
      const int64_t outer = g.outer, n = g.n, inner = g.inner;
      const T* dy = in[0].as<const T>();
      const T* y = in[1].as<const T>();
      T* dx = out[0].as<T>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t base = o * n * inner + i;
          double sum = 0;
          for (int64_t k = 0; k < n; ++k) {
            const int64_t e = base + k * inner;
            sum += Log ? static_cast<double>(dy[e]) : static_cast<double>(dy[e]) * static_cast<double>(y[e]);
          }
          for (int64_t k = 0; k < n; ++k) {
            const int64_t e = base + k * inner;
            const double g = static_cast<double>(dy[e]), v = static_cast<double>(y[e]);
            dx[e] = static_cast<T>(Log ? g - std::exp(v) * sum : v * (g - sum));
          }
        }
      }
    });
  });
}

}  // namespace

void register_reference_softmax_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("SoftmaxGrad", kFloatDTypes, &make_softmax_grad<false>));
  registry.add(reference_training_entry("LogSoftmaxGrad", kFloatDTypes, &make_softmax_grad<true>));
}

}  // namespace onnxtrain
