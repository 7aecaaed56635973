// MatMul with numpy's rules: a 1-D A is a row vector and a 1-D B a column vector (their added dim is
// dropped from the result); the leading batch dims broadcast. float32/float64 and float16/bfloat16
// (accumulating in double, the result rounded once: kernels/reference/half_float.h).
// FusedMatMul (graph/ops/training/fused_matmul.cc): the same product of operands of rank 2 or more, each
// read transposed where its flag says so, times alpha, plus C (N) on every row.
#include <algorithm>
#include <optional>

#include "kernels/reference/half_float.h"
#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

struct MatMulGeometry {
  int64_t m = 0, k = 0, n = 0;
  std::vector<int64_t> batch;                             // broadcast batch sizes
  std::vector<int64_t> a_batch_strides, b_batch_strides;  // in matrices, over `batch`; 0 where broadcast
  bool trans_a = false, trans_b = false;                  // A holds (K, M) matrices, B (N, K) ones
  bool bias = false;                                      // input 2 is C (N)
  double alpha = 1.0;                                     // FusedMatMul's factor of the product
  bool float32_output = false;                            // FusedMatMul's: half A and B, float32 Y and C
};

// Y (and C) of type Y: T, or float for FusedMatMul's float32_output over half operands.
template <typename T, typename Y = T>
void matmul(const MatMulGeometry& g, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  const T* a = inputs[0].as<const T>();
  const T* b = inputs[1].as<const T>();
  Y* y = outputs[0].as<Y>();
  for_each_broadcast(g.batch, {g.a_batch_strides, g.b_batch_strides},
                     [&](int64_t flat, const std::vector<int64_t>& offsets) {
                       const T* a_mat = a + offsets[0] * g.m * g.k;
                       const T* b_mat = b + offsets[1] * g.k * g.n;
                       Y* y_mat = y + flat * g.m * g.n;
                       for (int64_t i = 0; i < g.m; ++i) {
                         for (int64_t j = 0; j < g.n; ++j) {
                           double sum = 0.0;
                           for (int64_t p = 0; p < g.k; ++p) {
                             const T a_ip = g.trans_a ? a_mat[p * g.m + i] : a_mat[i * g.k + p];
                             const T b_pj = g.trans_b ? b_mat[j * g.k + p] : b_mat[p * g.n + j];
                             sum += static_cast<double>(a_ip) * static_cast<double>(b_pj);
                           }
                           sum *= g.alpha;
                           if (g.bias) sum += static_cast<double>(inputs[2].as<const Y>()[j]);
                           y_mat[i * g.n + j] = static_cast<Y>(sum);
                         }
                       }
                     });
}

// The broadcast batch of A's and B's leading dims, checking Y's sizes against it and g's M and N.
void set_batch(const KernelSpec& spec, const std::vector<int64_t>& a, const std::vector<int64_t>& b,
               const TensorDesc& y, MatMulGeometry& g) {
  const std::string operands = "A " + sizes_to_string(a) + " x B " + sizes_to_string(b);
  const std::vector<int64_t> batch_a(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
  const std::vector<int64_t> batch_b(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
  const std::optional<std::vector<int64_t>> batch = broadcast_sizes(batch_a, batch_b);
  if (!batch) kernel_fail(spec, "batch dimensions do not broadcast: " + operands);
  g.batch = *batch;
  g.a_batch_strides = broadcast_strides(batch_a, g.batch);
  g.b_batch_strides = broadcast_strides(batch_b, g.batch);
  std::vector<int64_t> expected = g.batch;
  if (a.size() >= 2) expected.push_back(g.m);
  if (b.size() >= 2) expected.push_back(g.n);
  if (y.sizes != expected) {
    kernel_fail(spec,
                "Y is " + sizes_to_string(y.sizes) + ", expected " + sizes_to_string(expected) + " for " + operands);
  }
}

std::unique_ptr<Kernel> make_kernel(const KernelSpec& spec, DType dtype, const MatMulGeometry& g) {
  return make_float_or_half_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel([g](std::span<const TensorView> in, std::span<const TensorView> out) {
      if (g.float32_output)
        matmul<T, float>(g, in, out);
      else
        matmul<T>(g, in, out);
    });
  });
}

// What both factories check first: A and B of one float dtype, and Y.
struct Operands {
  DType dtype;
  const std::vector<int64_t>& a;
  const std::vector<int64_t>& b;
  const TensorDesc& y;
  std::string text;  // "A (..) x B (..)" for messages
};

Operands operands_of(const KernelSpec& spec) {
  const DType dtype = require_same_float_or_half_dtype(spec, {0, 1});
  const std::vector<int64_t>& a = spec.inputs[0].sizes;
  const std::vector<int64_t>& b = require_input(spec, 1, "B").sizes;
  return {dtype, a, b, require_output(spec, 0, "Y"), "A " + sizes_to_string(a) + " x B " + sizes_to_string(b)};
}

std::unique_ptr<Kernel> make_matmul(const KernelSpec& spec) {
  const auto [dtype, a, b, y, operands] = operands_of(spec);
  if (a.empty() || b.empty()) kernel_fail(spec, "operands must have at least one dim: " + operands);
  MatMulGeometry g;
  g.m = a.size() == 1 ? 1 : a[a.size() - 2];
  g.k = a.back();
  g.n = b.size() == 1 ? 1 : b.back();
  const int64_t k_b = b.size() == 1 ? b[0] : b[b.size() - 2];
  if (k_b != g.k) kernel_fail(spec, "inner dimensions differ: " + operands);
  set_batch(spec, a, b, y, g);
  return make_kernel(spec, dtype, g);
}

std::unique_ptr<Kernel> make_fused_matmul(const KernelSpec& spec) {
  const auto [dtype, a, b, y, operands] = operands_of(spec);
  if (a.size() < 2 || b.size() < 2) kernel_fail(spec, "operands need rank 2 or more: " + operands);
  MatMulGeometry g;
  g.trans_a = spec.attributes.get_int("transA", 0) != 0;
  g.trans_b = spec.attributes.get_int("transB", 0) != 0;
  g.alpha = spec.attributes.get_float("alpha", 1.0);
  const size_t ra = a.size(), rb = b.size();
  g.m = g.trans_a ? a[ra - 1] : a[ra - 2];
  g.k = g.trans_a ? a[ra - 2] : a[ra - 1];
  g.n = g.trans_b ? b[rb - 2] : b[rb - 1];
  if ((g.trans_b ? b[rb - 1] : b[rb - 2]) != g.k) kernel_fail(spec, "inner dimensions differ: " + operands);
  g.float32_output = spec.attributes.get_int("float32_output", 0) != 0;
  const DType y_dtype = g.float32_output ? DType::Float32 : dtype;
  if (g.float32_output && dtype != DType::Float16 && dtype != DType::BFloat16)
    kernel_fail(spec, "float32_output needs float16 or bfloat16 operands");
  if (y.dtype != y_dtype) kernel_fail(spec, "Y must be " + std::string(dtype_name(y_dtype)));
  if (spec.inputs.size() > 2 && spec.inputs[2].present()) {
    if (spec.inputs[2].dtype != y_dtype || spec.inputs[2].sizes != std::vector<int64_t>{g.n})
      kernel_fail(spec,
                  "C must be (" + std::to_string(g.n) + ") in Y's dtype, not " + sizes_to_string(spec.inputs[2].sizes));
    g.bias = true;
  }
  set_batch(spec, a, b, y, g);
  return make_kernel(spec, dtype, g);
}

}  // namespace

void register_reference_matmul_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("MatMul", kFloatAndHalfDTypes, &make_matmul));
  registry.add(reference_training_entry("FusedMatMul", kFloatAndHalfDTypes, &make_fused_matmul));
}

}  // namespace onnxtrain
