// Cast, CastLike: y = x converted to another type. A float x gets dx = dy cast back to x's type (dy itself
// when the types match); no gradient flows into or out of a non-float value.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

int64_t onnx_code_of(DType dtype) {
  for (int64_t code = 1; code <= 32; ++code)
    if (dtype_from_onnx_code(code) == dtype) return code;
  return 0;
}

void cast_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId dy = ctx.output_grad(0);
  if (!dy.valid()) return;
  const DType to = ctx.dtype(ctx.input(0));
  if (ctx.dtype(dy) == to) {
    ctx.add_input_grad(0, dy);
    return;
  }
  const int64_t code = onnx_code_of(to);
  if (code == 0) ctx.fail("no ONNX type code for " + std::string(dtype_name(to)));
  ctx.add_input_grad(0, ctx.emit("Cast", {dy}, {{"to", code}}));
}

}  // namespace onnxtrain::gradient_rules
