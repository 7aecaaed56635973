// What the gradients of ScatterElements and ScatterND share (their files say why it holds for each): every
// update lands in y, so d updates = GATHER(dy, indices) for "none" and "add" alike; with "none" the
// overwritten data does not reach y, so d data = SCATTER(dy, indices, zeros shaped like updates); with "add"
// d data = dy. mul, max and min have no rule yet: their gradients depend on the other operands and on ties.
// `attributes`: what both the SCATTER and the GATHER take (ScatterElements' axis).
#pragma once

#include <string>

#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

inline void scatter_gradient(GradientContext& ctx, const char* scatter, const char* gather,
                             const Attributes& attributes) {
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
      ctx.add_input_grad(0, ctx.emit(scatter, {dy, ctx.input(1), zeros}, attributes));
    }
  }
  if (ctx.needs_grad(2)) ctx.add_input_grad(2, ctx.emit(gather, {dy, ctx.input(1)}, attributes));
}

}  // namespace onnxtrain::gradient_rules
