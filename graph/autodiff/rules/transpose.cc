// Transpose: y = x permuted by perm (default: dims reversed), so dx = Transpose(dy, inverse(perm)), where
// inverse[perm[k]] = k. The reversal is its own inverse, so a node without perm needs no rank.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void transpose_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  const Node& node = ctx.node();
  if (!node.has_attribute("perm")) {
    ctx.add_input_grad(0, ctx.emit("Transpose", {ctx.output_grad(0)}));
    return;
  }
  const std::vector<int64_t> perm = node.attr_ints("perm");
  std::vector<int64_t> inverse(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) inverse.at(static_cast<size_t>(perm[k])) = static_cast<int64_t>(k);
  ctx.add_input_grad(0, ctx.emit("Transpose", {ctx.output_grad(0)}, {{"perm", inverse}}));
}

}  // namespace onnxtrain::gradient_rules
