// Sum, Mean (variadic, numpy broadcasting): dx_i = dy (Sum) or dy / n (Mean), summed down to x_i's shape.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void sum_mean_gradient(GradientContext& ctx) {
  ValueId dy = ctx.output_grad(0);
  const size_t n = ctx.node().inputs.size();
  if (ctx.node().op_type == "Mean" && n > 1) {
    dy = ctx.emit("Mul", {dy, ctx.scalar(1.0 / static_cast<double>(n), ctx.dtype(ctx.output(0)))});
  }
  for (size_t i = 0; i < n; ++i) ctx.add_broadcast_input_grad(i, dy);
}

}  // namespace onnxtrain::gradient_rules
