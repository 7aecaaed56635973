// Sub: y = a - b (numpy broadcasting). da = dy, db = -dy, each summed down to its input's shape.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void sub_gradient(GradientContext& ctx) {
  ValueId dy = ctx.output_grad(0);
  ctx.add_broadcast_input_grad(0, dy);
  if (ctx.needs_grad(1)) ctx.add_broadcast_input_grad(1, ctx.emit("Neg", {dy}));
}

}  // namespace onnxtrain::gradient_rules
