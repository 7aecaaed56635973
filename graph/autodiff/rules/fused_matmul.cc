// FusedMatMul: Y = alpha·A'·B' + C, A' = transA ? Aᵀ : A, B' likewise (the last two axes). With
// dA' = alpha·dY·B'ᵀ and dB' = alpha·A'ᵀ·dY, the operands' own gradients are products (scaled by the same
// alpha) with the flags chosen so that nothing is transposed on its own:
//   dA = transA ? B'·dYᵀ : dY·B'ᵀ        dB = transB ? dYᵀ·A' : A'ᵀ·dY        dC = dY summed over the rows
// each summed down to its operand's shape where it was broadcast. Two matrices use Gemm's flags; a batch of
// rows against a weight matrix, (..., M, K)·(K, N), takes both gradients as Gemms over the flattened rows
// (as MatMul's rule does: the batched weight gradient would be one (K, N) matrix per batch entry).
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {
namespace {

// alpha·x'·y', x' = x transposed when `tx` (y' likewise): a Gemm for matrices, a FusedMatMul for batches.
ValueId product(GradientContext& ctx, ValueId x, bool tx, ValueId y, bool ty, double alpha) {
  Attributes flags{{"transA", int64_t{tx}}, {"transB", int64_t{ty}}};
  if (alpha != 1.0) flags["alpha"] = alpha;
  if (ctx.shape(x).rank() == 2 && ctx.shape(y).rank() == 2) return ctx.emit("Gemm", {x, y}, flags);
  return ctx.emit_training("FusedMatMul", {x, y}, flags);
}

}  // namespace

void fused_matmul_gradient(GradientContext& ctx) {
  const ValueId a = ctx.input(0), b = ctx.input(1);
  const Shape sa = ctx.shape(a), sb = ctx.shape(b);  // copies: emitting nodes may move the graph's values
  if (!sa.rank_known || !sb.rank_known) ctx.fail("needs the ranks of both operands");
  const bool ta = ctx.node().attr_int("transA", 0) != 0, tb = ctx.node().attr_int("transB", 0) != 0;
  const double alpha = ctx.node().attr_float("alpha", 1.0);
  ValueId dy = ctx.output_grad(0);
  if (ctx.has_input(2)) ctx.add_broadcast_input_grad(2, dy);
  // float32_output (autocast's cast back folded in): the products take dY in the operands' half type, as
  // the Cast's own gradient would give it; C's gradient sums the float32 dY.
  if (const DType half = ctx.dtype(a); ctx.dtype(dy) != half) dy = ctx.emit("Cast", {dy}, {{"to", onnx_code_of(half)}});
  if (sa.rank() >= 3 && sb.rank() == 2 && !ta && sa.dims.back().is_static()) {
    const Dim n = ctx.shape(dy).dims.back();
    if (!n.is_static()) ctx.fail("needs the static width N of a batch of rows times a matrix");
    rows_times_matrix_gradient(ctx, dy, sa.dims.back().value(), n.value(), tb, alpha);
    return;
  }
  if (ctx.needs_grad(0))
    ctx.add_broadcast_input_grad(0, ta ? product(ctx, b, tb, dy, true, alpha) : product(ctx, dy, false, b, !tb, alpha));
  if (ctx.needs_grad(1))
    ctx.add_broadcast_input_grad(1, tb ? product(ctx, dy, true, a, ta, alpha) : product(ctx, a, !ta, dy, false, alpha));
}

}  // namespace onnxtrain::gradient_rules
