// TopK: Values = X's elements at Indices along `axis` (GatherElements(X, Indices)), so dX is zeros shaped
// like X with each dValues element added where it was read: GatherElementsGrad(dValues, shape(X),
// Indices), as GatherElements' rule (gather_elements.cc). Indices and K are not differentiated; ties are
// ONNX's (lower index first), so at a tie the gradient goes to the element TopK returned.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void top_k_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  const ValueId dvalues = ctx.output_grad(0);
  if (!dvalues.valid()) return;  // only Indices reaches the loss: nothing flows back
  ValueId dx = ctx.emit_training("GatherElementsGrad", {dvalues, ctx.shape_of(ctx.input(0)), ctx.require_output(1)},
                                 {{"axis", ctx.node().attr_int("axis", -1)}});
  ctx.add_input_grad(0, dx);
}

}  // namespace onnxtrain::gradient_rules
