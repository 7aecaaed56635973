// Dropout: in training mode y = x * mask / (1 - ratio), so dx = DropoutGrad(dy, mask, ratio) =
// dy * mask / (1 - ratio), with the forward node's mask (added when the model omitted it). In inference
// (training_mode absent or false, and every opset before 12, as the kernels run it) y = x and dx = dy.
// A training_mode that is not a constant goes to DropoutGrad, which then decides at run time.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void dropout_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId dy = ctx.output_grad(0);
  if (ctx.node().opset < 12 || !ctx.has_input(2)) {
    ctx.add_input_grad(0, dy);
    return;
  }
  const Value& mode = ctx.value(ctx.input(2));
  const bool constant_mode = mode.data.has_value() && mode.data->numel() == 1;
  if (constant_mode && mode.data->to_int64().at(0) == 0) {
    ctx.add_input_grad(0, dy);
    return;
  }
  const ValueId training_mode = ctx.input(2);
  const ValueId ratio = ctx.has_input(1) ? ctx.input(1) : ValueId{};
  const ValueId mask = ctx.require_output(1);
  std::vector<ValueId> inputs = {dy, mask, ratio};
  if (!constant_mode) inputs.push_back(training_mode);
  while (!inputs.back().valid()) inputs.pop_back();  // trailing omitted ratio
  ctx.add_input_grad(0, ctx.emit_training("DropoutGrad", inputs));
}

}  // namespace onnxtrain::gradient_rules
