// CumSum: y[j] = sum of x[i] for i <= j (i < j when exclusive), so dx[i] = sum of dy[j] for j >= i (j > i):
// the running sum of dy in the other direction, with the same exclusive flag and axis.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void cumsum_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  const int64_t exclusive = ctx.node().attr_int("exclusive", 0), reverse = ctx.node().attr_int("reverse", 0);
  ctx.add_input_grad(0, ctx.emit("CumSum", {ctx.output_grad(0), ctx.input(1)},
                                 {{"exclusive", exclusive}, {"reverse", int64_t{reverse == 0 ? 1 : 0}}}));
}

}  // namespace onnxtrain::gradient_rules
