// ReduceSumSquare: y = sum(x^2), so dx = 2 x dy (dy broadcast back).
#include "graph/autodiff/rules/reduce_common.h"
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void reduce_sum_square_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId dy = ctx.output_grad(0);
  if (is_identity_reduction(ctx)) return ctx.add_input_grad(0, dy);
  ValueId two_dy = ctx.emit("Mul", {dy, ctx.scalar(2, ctx.dtype(dy))});
  ctx.add_input_grad(0, ctx.emit("Mul", {ctx.input(0), with_reduced_dims(ctx, two_dy)}));
}

}  // namespace onnxtrain::gradient_rules
