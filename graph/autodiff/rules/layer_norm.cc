// LayerNormalization: per row (X's dims from `axis` on) x̂ = (x − μ)/sqrt(σ² + ε), y = x̂·Scale + B. With
// g = dy·Scale: dx = (g − mean(g) − x̂·mean(g·x̂))/sqrt(σ² + ε); dScale = Σ dy·x̂ and dB = Σ dy over the rows,
// then over the dims where Scale/B broadcast. The Mean/InvStdDev outputs are not differentiated.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void layer_norm_gradient(GradientContext& ctx) {
  for (size_t i = 1; i < ctx.node().outputs.size(); ++i) {
    if (ctx.output(i).valid() && ctx.output_grad(i).valid()) {
      ctx.fail("the loss depends on output " + std::to_string(i) +
               " (Mean or InvStdDev), which is not differentiated; use Y only");
    }
  }
  ValueId dy = ctx.output_grad(0);
  if (!dy.valid()) return;
  std::vector<bool> wanted = {ctx.needs_grad(0), ctx.needs_grad(1), ctx.needs_grad(2)};
  while (!wanted.empty() && !wanted.back()) wanted.pop_back();
  if (wanted.empty()) return;
  std::vector<ValueId> grads =
      ctx.emit("LayerNormalizationGrad", {dy, ctx.input(0), ctx.input(1)},
               {{"axis", ctx.node().attr_int("axis", -1)}, {"epsilon", ctx.node().attr_float("epsilon", 1e-5)}}, wanted,
               kTrainingDomain);
  if (grads[0].valid()) ctx.add_input_grad(0, grads[0]);
  for (size_t i = 1; i < grads.size(); ++i) {
    if (grads[i].valid()) ctx.add_broadcast_input_grad(i, grads[i]);  // summed down to Scale's/B's own shape
  }
}

}  // namespace onnxtrain::gradient_rules
