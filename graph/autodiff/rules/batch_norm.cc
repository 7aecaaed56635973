// BatchNormalization: x̂ = (x − μ)/sqrt(σ² + ε), y = scale·x̂ + B. dScale = Σ dy·x̂, dB = Σ dy (over all but the
// channels). Inference (μ, σ² the running statistics, constants): dx = dy·scale/sqrt(σ² + ε); training (batch
// statistics): dx = scale/sqrt(σ² + ε)·(dy − mean(dy) − x̂·mean(dy·x̂)). Running/saved statistics are buffers.
// With a fused Relu (graph/autodiff/batch_norm_relu.h) the gradient node also reads the output, to mask dy.
#include "graph/autodiff/rules/rules.h"
#include "graph/fused_activation.h"
#include "graph/ops/op_helpers.h"

namespace onnxtrain::gradient_rules {

void batch_norm_gradient(GradientContext& ctx) {
  for (size_t i = 1; i < ctx.node().outputs.size(); ++i) {
    if (ctx.output(i).valid() && ctx.output_grad(i).valid()) {
      ctx.fail("the loss depends on output " + std::to_string(i) +
               " (running or saved statistics), which is not differentiated; use Y only");
    }
  }
  ValueId dy = ctx.output_grad(0);
  if (!dy.valid()) return;
  std::vector<bool> wanted = {ctx.needs_grad(0), ctx.needs_grad(1), ctx.needs_grad(2)};
  while (!wanted.empty() && !wanted.back()) wanted.pop_back();
  if (wanted.empty()) return;
  const int64_t training = op_helpers::batch_norm_training(ctx.node()) ? 1 : 0;
  std::vector<ValueId> inputs = {dy, ctx.input(0), ctx.input(1), ctx.input(3), ctx.input(4)};
  Attributes attributes{{"epsilon", ctx.node().attr_float("epsilon", 1e-5)}, {"training_mode", training}};
  if (fuses_relu(ctx.node().attributes)) {  // Y = Relu(BN(X)): dY is masked where Y is 0 (batch_norm_relu.h)
    inputs.push_back(ctx.output(0));
    attributes[kFusedActivation] = std::string("Relu");
  }
  std::vector<ValueId> grads = ctx.emit("BatchNormalizationGrad", inputs, attributes, wanted, kTrainingDomain);
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].valid()) ctx.add_input_grad(i, grads[i]);
  }
}

}  // namespace onnxtrain::gradient_rules
