// Add: y = a + b (numpy broadcasting). da = dy and db = dy, each summed down to its input's shape. With a
// fused Relu (graph/autodiff/add_relu.h), y = Relu(a + b): dy is first masked where y is not positive, by
// the ActivationGrad that Relu's own rule emits (which reads the output too).
#include "graph/autodiff/rules/rules.h"
#include "graph/fused_activation.h"

namespace onnxtrain::gradient_rules {

void add_gradient(GradientContext& ctx) {
  ValueId dy = ctx.output_grad(0);
  if (fuses_relu(ctx.node().attributes))
    dy = ctx.emit_training("ActivationGrad", {dy, ctx.output(0)}, {{"activation", std::string("Relu")}});
  ctx.add_broadcast_input_grad(0, dy);
  ctx.add_broadcast_input_grad(1, dy);
}

}  // namespace onnxtrain::gradient_rules
