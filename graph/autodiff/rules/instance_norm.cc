// InstanceNormalization: per (n, c) plane x̂ = (x − μ)/sqrt(σ² + ε), y = scale·x̂ + B. dScale = Σ dy·x̂ and
// dB = Σ dy over batch and plane; dx = scale/sqrt(σ² + ε)·(dy − mean(dy) − x̂·mean(dy·x̂)), means over the plane.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void instance_norm_gradient(GradientContext& ctx) {
  ValueId dy = ctx.output_grad(0);
  if (!dy.valid()) return;
  std::vector<bool> wanted = {ctx.needs_grad(0), ctx.needs_grad(1), ctx.needs_grad(2)};
  while (!wanted.empty() && !wanted.back()) wanted.pop_back();
  if (wanted.empty()) return;
  std::vector<ValueId> grads = ctx.emit("InstanceNormalizationGrad", {dy, ctx.input(0), ctx.input(1)},
                                        {{"epsilon", ctx.node().attr_float("epsilon", 1e-5)}}, wanted, kTrainingDomain);
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].valid()) ctx.add_input_grad(i, grads[i]);
  }
}

}  // namespace onnxtrain::gradient_rules
