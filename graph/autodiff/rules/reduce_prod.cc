// ReduceProd: dy/dx_i = prod_{j != i} x_j = y / x_i, so dx = dy * y / x (dy and y broadcast back). This is
// NaN/inf where x = 0 (PyTorch recomputes the product without x_i there); cases draw away_from_zero() inputs.
#include "graph/autodiff/rules/reduce_common.h"
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void reduce_prod_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId dy = ctx.output_grad(0);
  if (is_identity_reduction(ctx)) return ctx.add_input_grad(0, dy);
  ValueId dy_y = with_reduced_dims(ctx, ctx.emit("Mul", {dy, ctx.output(0)}));
  ctx.add_input_grad(0, ctx.emit("Div", {dy_y, ctx.input(0)}));
}

}  // namespace onnxtrain::gradient_rules
