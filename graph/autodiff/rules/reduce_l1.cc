// ReduceL1: y = sum(|x|), so dx = dy * sign(x) (dy broadcast back), with sign(0) = 0 as in PyTorch;
// sign(x) is composed as (x > 0) - (x < 0). Cases draw away_from_zero() inputs.
#include "graph/autodiff/rules/reduce_common.h"
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void reduce_l1_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId dy = ctx.output_grad(0);
  if (is_identity_reduction(ctx)) return ctx.add_input_grad(0, dy);
  ValueId x = ctx.input(0);
  ValueId zero = ctx.scalar(0, ctx.dtype(x));
  ValueId positive = ctx.emit("CastLike", {ctx.emit("Greater", {x, zero}), x});
  ValueId negative = ctx.emit("CastLike", {ctx.emit("Less", {x, zero}), x});
  ValueId sign = ctx.emit("Sub", {positive, negative});
  ctx.add_input_grad(0, ctx.emit("Mul", {sign, with_reduced_dims(ctx, dy)}));
}

}  // namespace onnxtrain::gradient_rules
