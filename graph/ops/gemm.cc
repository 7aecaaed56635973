// Gemm: Y = alpha·A'·B' + beta·C with A' = transA ? Aᵀ : A (M,K), B' = transB ? Bᵀ : B (K,N), and C
// (optional from opset 11) broadcast onto (M,N). Cost: 2·M·N·K (+M·N with C) forward, twice the matrix
// product backward (+M·N with C).
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

// (rows, cols) of an operand after its optional transpose; unknown when the rank is unknown.
std::pair<Dim, Dim> matrix_dims(const InferContext& ctx, size_t input, bool transposed) {
  const Shape& s = ctx.input_shape(input);
  if (!s.rank_known) return {Dim::unknown(), Dim::unknown()};
  if (s.rank() != 2) {
    fail_op(ctx, std::string(input == 0 ? "A" : "B") + " must be a matrix, got shape " + s.to_string());
  }
  return transposed ? std::pair{s.dims[1], s.dims[0]} : std::pair{s.dims[0], s.dims[1]};
}

void infer_gemm(InferContext& ctx) {
  require_floating(ctx, 0);
  require_same_dtype(ctx, 1, 0);
  const Node& node = ctx.node();
  for (const char* flag : {"transA", "transB"}) {
    const int64_t value = node.attr_int(flag, 0);
    if (value != 0 && value != 1) fail_op(ctx, std::string(flag) + " must be 0 or 1, got " + std::to_string(value));
  }
  const bool trans_a = node.attr_int("transA", 0) != 0;
  const bool trans_b = node.attr_int("transB", 0) != 0;
  auto [m, k_a] = matrix_dims(ctx, 0, trans_a);
  auto [k_b, n] = matrix_dims(ctx, 1, trans_b);
  if (k_a.is_static() && k_b.is_static() && k_a.value() != k_b.value()) {
    std::string how = std::string(trans_a ? " transA=1" : "") + (trans_b ? " transB=1" : "");
    fail_op(ctx, "inner dimensions differ: " + ctx.input_shape(0).to_string() + " x " + ctx.input_shape(1).to_string() +
                     (how.empty() ? "" : " (with" + how + ")"));
  }
  const Shape out({m, n});
  if (ctx.has_input(2)) {
    require_same_dtype(ctx, 2, 0);
    const Shape& c = ctx.input_shape(2);
    if (c.rank_known && !broadcasts_onto(c, out)) {  // unidirectional: C's dims are 1 or the output's
      fail_op(ctx, "C of shape " + c.to_string() + " does not broadcast to the output " + out.to_string());
    }
  } else if (ctx.opset() < 11) {
    fail_op(ctx, "input C is required before opset 11");
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
}

OpCost gemm_cost(const CostContext& ctx) {
  const Shape& a = ctx.inputs[0];
  if (!a.rank_known || a.rank() != 2) return {};
  const bool trans_a = ctx.node.attr_int("transA", 0) != 0;
  return matrix_product_cost(ctx, a.dims[trans_a ? 0 : 1], ctx.inputs.size() > 2 && ctx.inputs[2].rank_known);
}

}  // namespace

void register_gemm_op(OpRegistry& registry) {
  registry.add({.op_type = "Gemm",
                .min_inputs = 2,
                .max_inputs = 3,
                .input_kinds = {InputKind::Data, InputKind::Weight, InputKind::Weight},
                .infer = &infer_gemm,
                .cost = &gemm_cost});
}

}  // namespace onnxtrain
