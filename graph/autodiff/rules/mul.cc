// Mul: y = a * b (numpy broadcasting). da = dy * b and db = dy * a, each summed down to its input's shape.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void mul_gradient(GradientContext& ctx) {
  ValueId dy = ctx.output_grad(0);
  if (ctx.needs_grad(0)) ctx.add_broadcast_input_grad(0, ctx.emit("Mul", {dy, ctx.input(1)}));
  if (ctx.needs_grad(1)) ctx.add_broadcast_input_grad(1, ctx.emit("Mul", {dy, ctx.input(0)}));
}

}  // namespace onnxtrain::gradient_rules
