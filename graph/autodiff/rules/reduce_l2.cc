// ReduceL2: y = sqrt(sum(x^2)), so dx = dy * x / y (dy and y broadcast back); 0 where y = 0, as in
// PyTorch's norm backward (the subgradient 0 rather than 0/0).
#include "graph/autodiff/rules/reduce_common.h"
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void reduce_l2_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId dy = ctx.output_grad(0);
  if (is_identity_reduction(ctx)) return ctx.add_input_grad(0, dy);
  ValueId y = ctx.output(0);
  ValueId zero = ctx.scalar(0, ctx.dtype(dy));
  ValueId scale = ctx.emit("Where", {ctx.emit("Equal", {y, zero}), zero, ctx.emit("Div", {dy, y})});
  ctx.add_input_grad(0, ctx.emit("Mul", {ctx.input(0), with_reduced_dims(ctx, scale)}));
}

}  // namespace onnxtrain::gradient_rules
