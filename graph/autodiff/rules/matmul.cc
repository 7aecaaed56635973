// MatMul (numpy): Y = A·B over broadcast batch dims, a 1-D A a row (1,K), a 1-D B a column (K,1). With dY
// given those unit dims back, dA = dY·Bᵀ and dB = Aᵀ·dY, each summed down to its operand's shape (batch
// axes it was broadcast along; a 1-D operand's unit dim). Plain 2-D operands use Gemm's trans flags.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {
namespace {

// `v` with its last two axes swapped; a 1-D `v` (K) becomes a row (1,K) when `as_row`, else a column (K,1).
ValueId transposed(GradientContext& ctx, ValueId v, bool as_row) {
  const int64_t rank = ctx.shape(v).rank();
  if (rank == 1) return ctx.emit("Unsqueeze", {v, ctx.int64s({as_row ? 0 : 1})});
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i) perm.push_back(i);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return ctx.emit("Transpose", {v}, {{"perm", perm}});
}

}  // namespace

void rows_times_matrix_gradient(GradientContext& ctx, ValueId dy, int64_t k, int64_t n, bool trans_b, double alpha) {
  const ValueId a = ctx.input(0), b = ctx.input(1);
  const ValueId dy_rows = ctx.emit("Reshape", {dy, ctx.int64s({-1, n})});
  // Gemm's flags, with alpha where it is not 1.
  const auto gemm_flags = [alpha](const char* flag, bool set) {
    Attributes a{{flag, int64_t{set}}};
    if (alpha != 1.0) a["alpha"] = alpha;
    return a;
  };
  if (ctx.needs_grad(0)) {
    const ValueId da_rows = ctx.emit("Gemm", {dy_rows, b}, gemm_flags("transB", !trans_b));
    ctx.add_input_grad(0, ctx.emit("Reshape", {da_rows, ctx.emit("Shape", {a})}));
  }
  if (ctx.needs_grad(1)) {
    const ValueId a_rows = ctx.emit("Reshape", {a, ctx.int64s({-1, k})});
    const Attributes first_transposed = gemm_flags("transA", true);  // (K, N) = A_rowsᵀ·dY_rows, or its transpose
    ctx.add_input_grad(1, trans_b ? ctx.emit("Gemm", {dy_rows, a_rows}, first_transposed)
                                  : ctx.emit("Gemm", {a_rows, dy_rows}, first_transposed));
  }
}

void matmul_gradient(GradientContext& ctx) {
  const ValueId a = ctx.input(0), b = ctx.input(1);
  const Shape sa = ctx.shape(a), sb = ctx.shape(b);  // copies: output_grad may emit a Sum, moving the values
  if (!sa.rank_known || !sb.rank_known) ctx.fail("needs the ranks of both operands");
  const int64_t ra = sa.rank(), rb = sb.rank();
  ValueId dy = ctx.output_grad(0);
  if (ra == 2 && rb == 2) {
    if (ctx.needs_grad(0)) ctx.add_input_grad(0, ctx.emit("Gemm", {dy, b}, {{"transB", int64_t{1}}}));
    if (ctx.needs_grad(1)) ctx.add_input_grad(1, ctx.emit("Gemm", {a, dy}, {{"transA", int64_t{1}}}));
    return;
  }
  if (ra >= 3 && rb == 2 && sa.dims.back().is_static() && sb.dims[1].is_static()) {
    // A linear layer over a batch of sequences, (..., M, K) · (K, N): both gradients as plain matrix
    // products over the flattened rows. The batched form would transpose B, and build Aᵀ·dY per batch
    // entry ((..., K, N): for a language model's output layer, one vocabulary-sized matrix per sequence)
    // only to sum it away.
    rows_times_matrix_gradient(ctx, dy, sa.dims.back().value(), sb.dims[1].value(), false);
    return;
  }
  // dY with the unit dims of 1-D operands restored: (..., M, N).
  const int64_t rank = ctx.shape(dy).rank() + (ra == 1) + (rb == 1);
  std::vector<int64_t> unit_axes;
  if (ra == 1) unit_axes.push_back(rank - 2);
  if (rb == 1) unit_axes.push_back(rank - 1);
  if (!unit_axes.empty()) dy = ctx.emit("Unsqueeze", {dy, ctx.int64s(unit_axes)});
  if (ctx.needs_grad(0)) {
    // (..., M, K); for a 1-D A, M is 1 and summed away with the batch axes.
    ctx.add_broadcast_input_grad(0, ctx.emit("MatMul", {dy, transposed(ctx, b, true)}));
  }
  if (ctx.needs_grad(1)) {
    ValueId db = ctx.emit("MatMul", {transposed(ctx, a, false), dy});  // (..., K, N)
    if (rb == 1) db = ctx.emit("Squeeze", {db, ctx.int64s({-1})});
    ctx.add_broadcast_input_grad(1, db);
  }
}

}  // namespace onnxtrain::gradient_rules
