// ReduceMax/ReduceMin: dx = dy broadcast back, where x equals the extreme y (the mask Equal(x, y)), 0
// elsewhere. On ties every extreme element receives the whole dy (not dy / ties as torch.amax does);
// cases draw distinct() inputs so the extreme is unique and finite differences are meaningful.
#include "graph/autodiff/rules/reduce_common.h"
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void reduce_max_min_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId dy = ctx.output_grad(0);
  if (is_identity_reduction(ctx)) return ctx.add_input_grad(0, dy);
  ValueId x = ctx.input(0);
  ValueId mask = ctx.emit("Equal", {x, with_reduced_dims(ctx, ctx.output(0))});
  ValueId zero = ctx.scalar(0, ctx.dtype(dy));
  // Where broadcasts dy (reduced dims kept as 1) over the mask, which has x's shape.
  ctx.add_input_grad(0, ctx.emit("Where", {mask, with_reduced_dims(ctx, dy), zero}));
}

}  // namespace onnxtrain::gradient_rules
