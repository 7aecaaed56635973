// The one explicit table of gradient rules: (domain, op) → rule. Adding a differentiable op adds its
// schema, its rule file and one line here (and a case in tests/gradient_cases/).
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain {

namespace {

GradientRegistry make_builtin_gradients() {
  using namespace gradient_rules;
  GradientRegistry r;
  // --- elementwise arithmetic and activations ---
  r.add("", "Add", &add_gradient);
  r.add("", "Sub", &sub_gradient);
  r.add("", "Mul", &mul_gradient);
  // --- end elementwise ---

  // --- data movement ---
  // --- end data movement ---

  // --- conv, gemm, matmul ---
  // --- end conv, gemm, matmul ---

  // --- pooling, softmax, LRN ---
  // --- end pooling, softmax, LRN ---

  // --- normalisation ---
  // --- end normalisation ---

  // --- reductions and losses ---
  r.add("", "ReduceSum", &reduce_sum_gradient);
  // --- end reductions and losses ---
  return r;
}

}  // namespace

const GradientRegistry& GradientRegistry::builtin() {
  static const GradientRegistry registry = make_builtin_gradients();
  return registry;
}

}  // namespace onnxtrain
