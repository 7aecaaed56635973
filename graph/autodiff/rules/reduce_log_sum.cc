// ReduceLogSum: y = log(sum(x)), so dx = dy / sum(x) = dy / exp(y), broadcast back.
#include "graph/autodiff/rules/reduce_common.h"
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void reduce_log_sum_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId dy = ctx.output_grad(0);
  if (is_identity_reduction(ctx)) return ctx.add_input_grad(0, dy);
  ValueId g = ctx.emit("Div", {dy, ctx.emit("Exp", {ctx.output(0)})});
  ctx.add_input_grad(0, broadcast_to_input(ctx, g));
}

}  // namespace onnxtrain::gradient_rules
