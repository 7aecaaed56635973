// ScatterND: y = data with each index row's slice of updates written (reduction "none") or added ("add")
// at the slice of data the row names. Every update lands in y, so d updates = GatherND(dy, indices) for
// both. With "none" the overwritten data slices do not reach y: d data = dy with those slices zeroed,
// ScatterND(dy, indices, zeros shaped like updates); with "add" d data = dy. Repeated rows under "none"
// are undefined in ONNX (the kernels keep the last write); the rule then still hands every repeated
// update its dy, as PyTorch's index_put backward does. mul, max and min have no rule yet: their gradients
// depend on the other operands and on ties. The indices are not differentiated.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void scatter_nd_gradient(GradientContext& ctx) {
  const std::string reduction = ctx.node().attr_string("reduction", "none");
  if (reduction != "none" && reduction != "add") {
    ctx.fail("reduction '" + reduction + "' is not differentiable in onnxtrain yet (none and add are)");
  }
  ValueId dy = ctx.output_grad(0);
  if (ctx.needs_grad(0)) {
    if (reduction == "add") {
      ctx.add_input_grad(0, dy);
    } else {
      Tensor zero(ctx.dtype(dy), {1});
      ValueId zeros = ctx.emit("ConstantOfShape", {ctx.shape_of(ctx.input(2))}, {{"value", zero}});
      ctx.add_input_grad(0, ctx.emit("ScatterND", {dy, ctx.input(1), zeros}));
    }
  }
  if (ctx.needs_grad(2)) ctx.add_input_grad(2, ctx.emit("GatherND", {dy, ctx.input(1)}));
}

}  // namespace onnxtrain::gradient_rules
