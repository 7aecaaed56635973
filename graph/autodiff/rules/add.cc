// Add: y = a + b (numpy broadcasting). da = dy and db = dy, each summed down to its input's shape. With a
// fused Relu (graph/autodiff/add_relu.h), y = Relu(a + b): dy is first masked where y is not positive, by
// the ActivationGrad that Relu's own rule emits (which reads the output too). Where dy has two parts (a
// ResNet block's output feeds the next block's convolution and its residual Add), that ActivationGrad
// adds them itself (its optional third input) instead of after a Sum: one pass where there were two.
#include "graph/autodiff/rules/rules.h"
#include "graph/fused_activation.h"

namespace onnxtrain::gradient_rules {

void add_gradient(GradientContext& ctx) {
  ValueId dy;
  if (fuses_relu(ctx.node().attributes)) {
    const std::vector<ValueId> parts = ctx.output_grad_parts(0);
    if (!parts[0].valid()) return;
    std::vector<ValueId> inputs = {parts[0], ctx.output(0)};
    if (parts.size() == 2) inputs.push_back(parts[1]);
    dy = ctx.emit_training("ActivationGrad", inputs, {{"activation", std::string("Relu")}});
  } else {
    dy = ctx.output_grad(0);
  }
  ctx.add_broadcast_input_grad(0, dy);
  ctx.add_broadcast_input_grad(1, dy);
}

}  // namespace onnxtrain::gradient_rules
