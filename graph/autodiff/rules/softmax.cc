// Softmax: dX = Y ⊙ (dY − Σ_axis dY ⊙ Y); LogSoftmax: dX = dY − exp(Y) ⊙ Σ_axis dY; fused into
// SoftmaxGrad / LogSoftmaxGrad(dY, Y). Before opset 13 the op normalises the 2-D view at `axis`, so
// dY and Y are flattened there, differentiated over axis 1 and reshaped back.
#include "graph/autodiff/rules/rules.h"
#include "graph/ops/op_helpers.h"

namespace onnxtrain::gradient_rules {
namespace {

void softmax_family_gradient(GradientContext& ctx, const char* backward_op) {
  if (!ctx.needs_grad(0)) return;
  ValueId x = ctx.input(0);
  const Shape& shape = ctx.shape(x);
  if (!shape.rank_known) ctx.fail("needs the input's rank");
  const op_helpers::SoftmaxAxes axes = op_helpers::softmax_axes(ctx.node(), shape.rank());
  ValueId dy = ctx.output_grad(0);
  ValueId y = ctx.output(0);
  if (axes.first == axes.last) {
    ctx.add_input_grad(0, ctx.emit_training(backward_op, {dy, y}, {{"axis", axes.first}}));
    return;
  }
  const Attributes flatten = {{"axis", axes.first}};
  ValueId dx2d = ctx.emit_training(backward_op, {ctx.emit("Flatten", {dy}, flatten), ctx.emit("Flatten", {y}, flatten)},
                                   {{"axis", int64_t{1}}});
  ctx.add_input_grad(0, ctx.emit("Reshape", {dx2d, ctx.shape_of(x)}));
}

}  // namespace

void softmax_gradient(GradientContext& ctx) { softmax_family_gradient(ctx, "SoftmaxGrad"); }
void log_softmax_gradient(GradientContext& ctx) { softmax_family_gradient(ctx, "LogSoftmaxGrad"); }

}  // namespace onnxtrain::gradient_rules
