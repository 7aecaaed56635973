// Slice: y = x[starts:ends:steps] on some axes (numpy clamping, negative steps walk backwards), so dx is
// zeros shaped like x with dy scattered back into the sliced positions: SliceGrad(dy, shape(x), starts,
// ends, axes, steps). Before opset 10 starts/ends/axes are attributes; they become constants here.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void slice_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  const Node& node = ctx.node();
  std::vector<ValueId> inputs = {ctx.output_grad(0), ctx.shape_of(ctx.input(0))};
  if (node.opset < 10) {
    inputs.push_back(ctx.int64s(node.attr_ints("starts")));
    inputs.push_back(ctx.int64s(node.attr_ints("ends")));
    if (node.has_attribute("axes")) inputs.push_back(ctx.int64s(node.attr_ints("axes")));
  } else {
    for (size_t i = 1; i < node.inputs.size(); ++i) inputs.push_back(node.inputs[i]);  // omitted ones stay invalid
  }
  ctx.add_input_grad(0, ctx.emit_training("SliceGrad", inputs));
}

}  // namespace onnxtrain::gradient_rules
