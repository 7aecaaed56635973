// Gemm: Y (M,N) = alpha·A'·B' + beta·C, A' = transA ? Aᵀ : A, B' = transB ? Bᵀ : B, the optional C
// broadcast unidirectionally onto (M,N). float32/float64 and float16/bfloat16 (accumulating in double, the
// result rounded once: kernels/reference/half_float.h).
#include <algorithm>

#include "kernels/reference/half_float.h"
#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

struct GemmGeometry {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  double alpha = 1, beta = 1;
  std::vector<int64_t> c_strides;  // over (M,N); 0 where C broadcasts; empty without C
};

template <typename T>
void gemm(const GemmGeometry& g, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  const T* a = inputs[0].as<const T>();
  const T* b = inputs[1].as<const T>();
  const T* c = g.c_strides.empty() || !has_view(inputs, 2) ? nullptr : inputs[2].as<const T>();
  T* y = outputs[0].as<T>();
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        const double av = g.trans_a ? a[p * g.m + i] : a[i * g.k + p];
        const double bv = g.trans_b ? b[j * g.k + p] : b[p * g.n + j];
        sum += av * bv;
      }
      double value = g.alpha * sum;
      if (c) value += g.beta * static_cast<double>(c[i * g.c_strides[0] + j * g.c_strides[1]]);
      y[i * g.n + j] = static_cast<T>(value);
    }
  }
}

std::unique_ptr<Kernel> make_gemm(const KernelSpec& spec) {
  const DType dtype = require_same_float_or_half_dtype(spec, {0, 1, 2});
  const TensorDesc& a = spec.inputs[0];
  const TensorDesc& b = require_input(spec, 1, "B");
  const TensorDesc& y = require_output(spec, 0, "Y");
  if (a.sizes.size() != 2 || b.sizes.size() != 2) {
    kernel_fail(spec, "A " + sizes_to_string(a.sizes) + " and B " + sizes_to_string(b.sizes) + " must be matrices");
  }
  GemmGeometry g;
  g.trans_a = spec.attributes.get_int("transA", 0) != 0;
  g.trans_b = spec.attributes.get_int("transB", 0) != 0;
  g.alpha = spec.attributes.get_float("alpha", 1.0);
  g.beta = spec.attributes.get_float("beta", 1.0);
  g.m = g.trans_a ? a.sizes[1] : a.sizes[0];
  g.k = g.trans_a ? a.sizes[0] : a.sizes[1];
  const int64_t k_b = g.trans_b ? b.sizes[1] : b.sizes[0];
  g.n = g.trans_b ? b.sizes[0] : b.sizes[1];
  if (k_b != g.k) {
    kernel_fail(spec, "inner dimensions differ: A " + sizes_to_string(a.sizes) + " x B " + sizes_to_string(b.sizes) +
                          " (transA=" + std::to_string(g.trans_a) + ", transB=" + std::to_string(g.trans_b) + ")");
  }
  const std::vector<int64_t> out{g.m, g.n};
  if (y.sizes != out) kernel_fail(spec, "Y is " + sizes_to_string(y.sizes) + ", expected " + sizes_to_string(out));
  if (has_input(spec, 2)) {
    const std::vector<int64_t>& c = spec.inputs[2].sizes;
    if (!broadcasts_onto(c, out))
      kernel_fail(spec, "C " + sizes_to_string(c) + " does not broadcast to " + sizes_to_string(out));
    g.c_strides = broadcast_strides(c, out);
  }
  return make_float_or_half_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { gemm<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_gemm_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Gemm", kFloatAndHalfDTypes, &make_gemm));
}

}  // namespace onnxtrain
