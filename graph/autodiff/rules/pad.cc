// Pad. Constant mode: y is x with pads added (or cropped, for negative pads) at the begin and end of each
// axis, so dx = Pad(dy, -pads): the added border is cropped off and a cropped border comes back as zeros.
// Reflect, edge and wrap: each y element copies one x element, so dx = PadGrad(dy, shape(x), pads), which
// adds every dy element into the x element it was copied from.
#include <algorithm>

#include "graph/autodiff/rules/rules.h"
#include "graph/autodiff/rules/static_ints.h"

namespace onnxtrain::gradient_rules {

void pad_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  const Node& node = ctx.node();
  const std::string mode = node.attr_string("mode", "constant");
  ValueId dy = ctx.output_grad(0);

  // The pads as [begins..., ends...] over every axis: static, or (no axes input) a value read at run time.
  std::optional<std::vector<int64_t>> pads;
  ValueId pads_value;
  if (node.opset < 11) {
    pads = node.attr_ints(node.opset <= 1 && node.has_attribute("paddings") ? "paddings" : "pads");
  } else if (node.opset >= 18 && ctx.has_input(3)) {  // the backward ops have no axes input: every axis
    const Shape& x = ctx.shape(ctx.input(0));
    std::optional<std::vector<int64_t>> given = static_ints(ctx, ctx.input(1));
    std::optional<std::vector<int64_t>> axes = static_ints(ctx, ctx.input(3));
    if (!given || !axes || !x.rank_known)
      ctx.fail("with an axes input, pads and axes must be constants and the rank known");
    if (given->size() != 2 * axes->size()) ctx.fail("pads must give a begin and an end for every axis in axes");
    const int64_t rank = x.rank();
    pads = std::vector<int64_t>(static_cast<size_t>(2 * rank), 0);
    for (size_t j = 0; j < axes->size(); ++j) {
      const int64_t a = (*axes)[j] < 0 ? (*axes)[j] + rank : (*axes)[j];
      pads->at(static_cast<size_t>(a)) = (*given)[j];
      pads->at(static_cast<size_t>(a + rank)) = (*given)[j + axes->size()];
    }
  } else {
    pads = static_ints(ctx, ctx.input(1));
    if (!pads) pads_value = ctx.input(1);
  }

  if (mode != "constant") {
    if (pads) pads_value = ctx.int64s(*pads);
    ctx.add_input_grad(0, ctx.emit_training("PadGrad", {dy, ctx.shape_of(ctx.input(0)), pads_value}, {{"mode", mode}}));
    return;
  }
  if (!pads) {
    ctx.add_input_grad(0, ctx.emit("Pad", {dy, ctx.emit("Neg", {pads_value})}));
    return;
  }
  std::vector<int64_t> negated = *pads;
  for (int64_t& p : negated) p = -p;
  if (std::all_of(negated.begin(), negated.end(), [](int64_t p) { return p == 0; })) {
    ctx.add_input_grad(0, dy);
    return;
  }
  ctx.add_input_grad(0, ctx.emit("Pad", {dy, ctx.int64s(negated)}));
}

}  // namespace onnxtrain::gradient_rules
