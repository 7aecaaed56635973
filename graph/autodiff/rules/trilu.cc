// Trilu keeps one triangle of x and zeroes the rest, so dx is the same triangle of dy.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void trilu_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  std::vector<ValueId> inputs{ctx.output_grad(0)};
  if (ctx.has_input(1)) inputs.push_back(ctx.input(1));
  ctx.add_input_grad(0, ctx.emit("Trilu", inputs, {{"upper", ctx.node().attr_int("upper", 1)}}));
}

}  // namespace onnxtrain::gradient_rules
