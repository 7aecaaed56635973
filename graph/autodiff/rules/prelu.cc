// PRelu: y = x > 0 ? x : slope * x (slope broadcast onto x). dx = dy where x > 0, else dy * slope;
// dslope = (x > 0 ? 0 : dy * x) summed down to the slope's shape.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void prelu_gradient(GradientContext& ctx) {
  ValueId dy = ctx.output_grad(0);
  ValueId x = ctx.input(0);
  ValueId zero = ctx.scalar(0, ctx.dtype(x));
  ValueId positive = ctx.emit("Greater", {x, zero});
  if (ctx.needs_grad(0)) ctx.add_input_grad(0, ctx.emit("Where", {positive, dy, ctx.emit("Mul", {dy, ctx.input(1)})}));
  if (ctx.needs_grad(1)) {
    ctx.add_broadcast_input_grad(1, ctx.emit("Where", {positive, zero, ctx.emit("Mul", {dy, x})}));
  }
}

}  // namespace onnxtrain::gradient_rules
