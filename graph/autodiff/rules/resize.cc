// Resize and Upsample: y is a fixed linear map of x (each element a weighted sum of the input elements its
// taps read), so dx = ResizeGrad(dy, shape(x), roi, scales, sizes), the transposed map, with the forward's
// attributes. Upsample-7's scales attribute becomes a constant input; `legacy` keeps Upsample's and
// Resize-10's sampling (asymmetric coordinates, their nearest rounding).
#include "graph/autodiff/rules/rules.h"
#include "graph/resize_sampling.h"

namespace onnxtrain::gradient_rules {

void resize_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  const Node& node = ctx.node();
  const ResizeSlots slots = resize_slots(node.op_type, node.opset);
  auto operand = [&](int slot) { return slot >= 0 && ctx.has_input(slot) ? ctx.input(slot) : ValueId{}; };
  ValueId scales = operand(slots.scales);
  if (node.op_type == "Upsample" && slots.scales < 0) {
    const std::vector<double> values = node.attr_floats("scales");
    Tensor t(DType::Float32, {static_cast<int64_t>(values.size())});
    for (size_t i = 0; i < values.size(); ++i) t.data<float>()[i] = static_cast<float>(values[i]);
    scales = ctx.constant(std::move(t));
  }
  Attributes attributes = node.attributes;
  attributes.erase("scales");
  attributes["legacy"] = Attribute(int64_t{resize_is_legacy(node.op_type, node.opset) ? 1 : 0});
  ctx.add_input_grad(0, ctx.emit_training("ResizeGrad",
                                          {ctx.output_grad(0), ctx.shape_of(ctx.input(0)), operand(slots.roi), scales,
                                           operand(slots.sizes)},
                                          attributes));
}

}  // namespace onnxtrain::gradient_rules
