// ReduceLogSumExp: y = log(sum(exp(x))), so dx = dy * exp(x - y) (the softmax of x over the reduced
// axes), with dy and y broadcast back. exp(x - y) <= 1, so this cannot overflow.
#include "graph/autodiff/rules/reduce_common.h"
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void reduce_log_sum_exp_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId dy = ctx.output_grad(0);
  if (is_identity_reduction(ctx)) return ctx.add_input_grad(0, dy);
  ValueId p = ctx.emit("Exp", {ctx.emit("Sub", {ctx.input(0), with_reduced_dims(ctx, ctx.output(0))})});
  ctx.add_input_grad(0, ctx.emit("Mul", {p, with_reduced_dims(ctx, dy)}));
}

}  // namespace onnxtrain::gradient_rules
