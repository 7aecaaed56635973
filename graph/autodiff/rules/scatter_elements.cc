// ScatterElements: y = data with updates written (reduction "none") or added ("add") at the indexed
// positions along `axis`. Every update lands in y, so d updates = GatherElements(dy, indices) for both.
// With "none" the overwritten data elements do not reach y: d data = dy with those positions zeroed,
// ScatterElements(dy, indices, zeros shaped like updates); with "add" d data = dy. Repeated indices under
// "none" are undefined in ONNX (the kernels keep the last write); the rule then still hands every
// repeated update its dy, as PyTorch's scatter backward does. mul, max and min have no rule yet: their
// gradients depend on the other operands and on ties. The indices are not differentiated.
#include "graph/autodiff/rules/scatter_rule.h"

namespace onnxtrain::gradient_rules {

void scatter_elements_gradient(GradientContext& ctx) {
  scatter_gradient(ctx, "ScatterElements", "GatherElements", {{"axis", ctx.node().attr_int("axis", 0)}});
}

}  // namespace onnxtrain::gradient_rules
