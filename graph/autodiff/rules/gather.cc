// Gather: y[o, j..., i] = x[o, indices[j...], i] along `axis`, so dx is zeros shaped like x with each slice
// of dy added at its index: GatherGrad(dy, shape(x), indices) (repeated indices accumulate, negative ones
// count from the end).
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void gather_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId dx = ctx.emit_training("GatherGrad", {ctx.output_grad(0), ctx.shape_of(ctx.input(0)), ctx.input(1)},
                                 {{"axis", ctx.node().attr_int("axis", 0)}});
  ctx.add_input_grad(0, dx);
}

}  // namespace onnxtrain::gradient_rules
