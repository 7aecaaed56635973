// Max, Min (variadic, numpy broadcasting): dx_i = dy where x_i == y, else 0, summed down to x_i's shape.
// On ties every extreme input gets the whole dy (onnxtrain's choice, see tests/gradient_harness.h).
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void max_min_gradient(GradientContext& ctx) {
  ValueId dy = ctx.output_grad(0);
  const size_t n = ctx.node().inputs.size();
  if (n == 1) {
    ctx.add_input_grad(0, dy);
    return;
  }
  ValueId y = ctx.output(0);
  ValueId zero = ctx.scalar(0, ctx.dtype(y));
  for (size_t i = 0; i < n; ++i) {
    if (!ctx.needs_grad(i)) continue;
    ctx.add_broadcast_input_grad(i, ctx.emit("Where", {ctx.emit("Equal", {ctx.input(i), y}), dy, zero}));
  }
}

}  // namespace onnxtrain::gradient_rules
