// Div: y = a / b (numpy broadcasting). da = dy / b and db = -dy * a / b² = -(dy * y) / b, each summed
// down to its input's shape.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void div_gradient(GradientContext& ctx) {
  ValueId dy = ctx.output_grad(0);
  ValueId b = ctx.input(1);
  if (ctx.needs_grad(0)) ctx.add_broadcast_input_grad(0, ctx.emit("Div", {dy, b}));
  if (ctx.needs_grad(1)) {
    ValueId dy_y = ctx.emit("Mul", {dy, ctx.output(0)});
    ctx.add_broadcast_input_grad(1, ctx.emit("Neg", {ctx.emit("Div", {dy_y, b})}));
  }
}

}  // namespace onnxtrain::gradient_rules
