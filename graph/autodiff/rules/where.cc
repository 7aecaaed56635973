// Where: y = c ? a : b (numpy broadcasting of all three). da = (c ? dy : 0) and db = (c ? 0 : dy), each
// summed down to its input's shape; the condition is not differentiated.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void where_gradient(GradientContext& ctx) {
  ValueId dy = ctx.output_grad(0);
  ValueId c = ctx.input(0);
  ValueId zero = ctx.scalar(0, ctx.dtype(ctx.output(0)));
  if (ctx.needs_grad(1)) ctx.add_broadcast_input_grad(1, ctx.emit("Where", {c, dy, zero}));
  if (ctx.needs_grad(2)) ctx.add_broadcast_input_grad(2, ctx.emit("Where", {c, zero, dy}));
}

}  // namespace onnxtrain::gradient_rules
