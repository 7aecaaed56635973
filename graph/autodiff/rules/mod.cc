// Mod with fmod 1 (C's fmod, what ONNX requires for floats): y = a - b·trunc(a / b) (numpy broadcasting).
// Away from the jumps where a / b crosses an integer, da = dy and db = -dy · trunc(a / b), as torch's
// fmod; trunc(a / b) is (a - y) / b, an integer up to rounding (ONNX has no Trunc), so no new op is needed.
// Each gradient is summed down to its input's shape. Integer Mod never carries a gradient.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void mod_gradient(GradientContext& ctx) {
  if (ctx.node().attr_int("fmod", 0) == 0) ctx.fail("a float Mod has fmod 1 (the schema refuses fmod 0)");
  const ValueId dy = ctx.output_grad(0);
  const ValueId a = ctx.input(0), b = ctx.input(1);
  if (ctx.needs_grad(0)) ctx.add_broadcast_input_grad(0, dy);
  if (ctx.needs_grad(1)) {
    const ValueId quotient = ctx.emit("Div", {ctx.emit("Sub", {a, ctx.output(0)}), b});
    ctx.add_broadcast_input_grad(1, ctx.emit("Neg", {ctx.emit("Mul", {dy, quotient})}));
  }
}

}  // namespace onnxtrain::gradient_rules
