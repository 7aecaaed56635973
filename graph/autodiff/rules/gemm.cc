// Gemm: Y = alpha·A'·B' + beta·C with A' = transA ? Aᵀ : A, B' = transB ? Bᵀ : B. dA' = alpha·dY·B'ᵀ and
// dB' = alpha·A'ᵀ·dY, each one Gemm whose trans flags also undo the operand's own transpose; dC = beta·dY
// summed down to C's (unidirectionally broadcast) shape.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void gemm_gradient(GradientContext& ctx) {
  const Node& node = ctx.node();
  const int64_t trans_a = node.attr_int("transA", 0) != 0;
  const int64_t trans_b = node.attr_int("transB", 0) != 0;
  const double alpha = node.attr_float("alpha", 1.0);
  const double beta = node.attr_float("beta", 1.0);
  ValueId dy = ctx.output_grad(0);
  const ValueId a = ctx.input(0), b = ctx.input(1);
  auto gemm = [&](ValueId p, ValueId q, int64_t tp, int64_t tq) {
    Attributes attrs{{"transA", tp}, {"transB", tq}};
    if (alpha != 1.0) attrs["alpha"] = alpha;
    return ctx.emit("Gemm", {p, q}, attrs);
  };
  if (ctx.needs_grad(0)) {
    // transA=0: dA = alpha·dY·B'ᵀ; transA=1: dA = (dA')ᵀ = alpha·B'·dYᵀ.
    ctx.add_input_grad(0, trans_a ? gemm(b, dy, trans_b, 1) : gemm(dy, b, 0, 1 - trans_b));
  }
  if (ctx.needs_grad(1)) {
    // transB=0: dB = alpha·A'ᵀ·dY; transB=1: dB = (dB')ᵀ = alpha·dYᵀ·A'.
    ctx.add_input_grad(1, trans_b ? gemm(dy, a, 1, trans_a) : gemm(a, dy, 1 - trans_a, 0));
  }
  if (ctx.needs_grad(2)) {
    ValueId dc = beta == 1.0 ? dy : ctx.emit("Mul", {dy, ctx.scalar(beta, ctx.dtype(dy))});
    ctx.add_broadcast_input_grad(2, dc);
  }
}

}  // namespace onnxtrain::gradient_rules
