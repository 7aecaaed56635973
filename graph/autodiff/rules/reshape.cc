// Reshape, Flatten, Squeeze, Unsqueeze: y holds x's elements in the same order under another shape, so
// dx = Reshape(dy, shape(x)) (allowzero=1: a 0 in x's shape is a real empty dim, not "copy dy's").
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void reshape_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId dx = ctx.emit("Reshape", {ctx.output_grad(0), ctx.shape_of(ctx.input(0))}, {{"allowzero", int64_t{1}}});
  ctx.add_input_grad(0, dx);
}

}  // namespace onnxtrain::gradient_rules
