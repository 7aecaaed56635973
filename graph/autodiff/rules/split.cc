// Split: the outputs are consecutive pieces of x along `axis` (sizes from the split input or attribute, or
// num_outputs), so dx = Concat(dy_0, dy_1, ...) along the axis, with zeros for outputs the loss ignores.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void split_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  std::vector<ValueId> parts;
  for (size_t i = 0; i < ctx.node().outputs.size(); ++i) parts.push_back(ctx.output_grad_or_zeros(i));
  ctx.add_input_grad(0, ctx.emit("Concat", parts, {{"axis", ctx.node().attr_int("axis", 0)}}));
}

}  // namespace onnxtrain::gradient_rules
