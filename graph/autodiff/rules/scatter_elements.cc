// ScatterElements: y = data with updates written (reduction "none") or added ("add") at the indexed
// positions along `axis`. Every update lands in y, so d updates = GatherElements(dy, indices) for both.
// With "none" the overwritten data elements do not reach y: d data = dy with those positions zeroed,
// ScatterElements(dy, indices, zeros shaped like updates); with "add" d data = dy. Repeated indices under
// "none" are undefined in ONNX (the kernels keep the last write); the rule then still hands every
// repeated update its dy, as PyTorch's scatter backward does. mul, max and min have no rule yet: their
// gradients depend on the other operands and on ties. The indices are not differentiated.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void scatter_elements_gradient(GradientContext& ctx) {
  const std::string reduction = ctx.node().attr_string("reduction", "none");
  if (reduction != "none" && reduction != "add") {
    ctx.fail("reduction '" + reduction + "' is not differentiable in onnxtrain yet (none and add are)");
  }
  const Attributes axis = {{"axis", ctx.node().attr_int("axis", 0)}};
  ValueId dy = ctx.output_grad(0);
  if (ctx.needs_grad(0)) {
    if (reduction == "add") {
      ctx.add_input_grad(0, dy);
    } else {
      Tensor zero(ctx.dtype(dy), {1});
      ValueId zeros = ctx.emit("ConstantOfShape", {ctx.shape_of(ctx.input(2))}, {{"value", zero}});
      ctx.add_input_grad(0, ctx.emit("ScatterElements", {dy, ctx.input(1), zeros}, axis));
    }
  }
  if (ctx.needs_grad(2)) ctx.add_input_grad(2, ctx.emit("GatherElements", {dy, ctx.input(1)}, axis));
}

}  // namespace onnxtrain::gradient_rules
