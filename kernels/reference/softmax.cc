// Reference kernels for Softmax and LogSoftmax over float32/float64. Before opset 13 the input is
// coerced to 2-D at `axis` (default 1) and normalised over every dim from `axis` on; from 13 over
// `axis` alone (default -1). Computed in double with the row maximum subtracted (no overflow).
#include <cmath>

#include "kernels/reference/elementwise_common.h"
#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <bool Log>
std::unique_ptr<Kernel> make_softmax(const KernelSpec& spec) {
  const auto checked = check_softmax(spec);
  const DType dtype = checked.dtype;
  const int64_t outer = checked.geometry.outer, n = checked.geometry.n, inner = checked.geometry.inner;
  return make_closure_kernel([dtype, outer, n, inner](auto inputs, auto outputs) {
    dispatch_float(dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* x = inputs[0].template as<T>();
      T* y = outputs[0].template as<T>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t base = o * n * inner + i;
          double max = -INFINITY;
          for (int64_t k = 0; k < n; ++k) max = std::max(max, static_cast<double>(x[base + k * inner]));
          double sum = 0;
          for (int64_t k = 0; k < n; ++k) sum += std::exp(static_cast<double>(x[base + k * inner]) - max);
          for (int64_t k = 0; k < n; ++k) {
            const double shifted = static_cast<double>(x[base + k * inner]) - max;
            y[base + k * inner] = static_cast<T>(Log ? shifted - std::log(sum) : std::exp(shifted) / sum);
          }
        }
      }
    });
  });
}

}  // namespace

void register_reference_softmax_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Softmax", kFloatDTypes, &make_softmax<false>));
  registry.add(reference_entry("LogSoftmax", kFloatDTypes, &make_softmax<true>));
}

}  // namespace onnxtrain
