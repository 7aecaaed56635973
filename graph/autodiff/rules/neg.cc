// Neg: y = -x, so dx = -dy.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void neg_gradient(GradientContext& ctx) {
  if (ctx.needs_grad(0)) ctx.add_input_grad(0, ctx.emit("Neg", {ctx.output_grad(0)}));
}

}  // namespace onnxtrain::gradient_rules
