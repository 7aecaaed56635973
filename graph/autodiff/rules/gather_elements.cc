// GatherElements: y[p] = x[p with the coordinate along `axis` replaced by indices[p]], so dx is zeros
// shaped like x with each dy element added at the position it was read from: GatherElementsGrad(dy,
// shape(x), indices) (repeated indices accumulate, negative ones count from the end). The indices are
// not differentiated.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void gather_elements_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId dx = ctx.emit_training("GatherElementsGrad", {ctx.output_grad(0), ctx.shape_of(ctx.input(0)), ctx.input(1)},
                                 {{"axis", ctx.node().attr_int("axis", 0)}});
  ctx.add_input_grad(0, dx);
}

}  // namespace onnxtrain::gradient_rules
