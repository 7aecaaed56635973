// FusedMatMul (ai.onnxtrain, opset 1): Y = alpha·A'·B' [+ C], numpy's batch broadcasting, where A' is A
// with its last two axes swapped when transA is 1 (B' likewise with transB) and the optional C (N) is added
// to every row. Both operands have rank 2 or more. Training on the CPU turns a float32 MatMul into one,
// folding in the Transposes and constant scalings that feed it and the scaling and bias Add that read it
// (graph/autodiff/fused_matmul.h), so neither the forward nor the gradient products (which take transposed
// operands) copy a matrix to transpose or scale it.
//   FusedMatMul(A, B[, C]) -> Y        attributes transA, transB (0 or 1, default 0), alpha (default 1),
//                                      float32_output (0 or 1, default 0)
// float32_output 1 takes float16 or bfloat16 A and B and writes a float32 Y (C float32 too): autocast's
// product with its cast back and bias folded in (graph/mixed_precision.h), accumulated in float32 and never
// rounded to half.
// Cost: MatMul's (2·K per output element forward, twice that backward).
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

// The matrix dims (rows, cols) of operand `i` as the product reads it.
std::pair<Dim, Dim> product_dims(const Shape& s, bool transposed) {
  const size_t r = s.dims.size();
  return transposed ? std::pair{s.dims[r - 1], s.dims[r - 2]} : std::pair{s.dims[r - 2], s.dims[r - 1]};
}

void infer_fused_matmul(InferContext& ctx) {
  require_numeric(ctx, 0);
  require_same_dtype(ctx, 1, 0);
  const bool float32_output = ctx.node().attr_int("float32_output", 0) != 0;
  if (float32_output && ctx.input_dtype(0) != DType::Float16 && ctx.input_dtype(0) != DType::BFloat16)
    fail_op(ctx,
            "float32_output needs float16 or bfloat16 operands, not " + std::string(dtype_name(ctx.input_dtype(0))));
  const DType y_dtype = float32_output ? DType::Float32 : ctx.input_dtype(0);
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  if (!a.rank_known || !b.rank_known) return ctx.set_output(0, y_dtype, Shape::unknown_rank());
  const std::string operands = a.to_string() + " x " + b.to_string();
  if (a.rank() < 2 || b.rank() < 2) fail_op(ctx, "both operands need rank 2 or more: " + operands);
  const auto [m, k_a] = product_dims(a, ctx.node().attr_int("transA", 0) != 0);
  const auto [k_b, n] = product_dims(b, ctx.node().attr_int("transB", 0) != 0);
  if (k_a.is_static() && k_b.is_static() && k_a.value() != k_b.value()) {
    fail_op(ctx, "inner dimensions differ: " + operands + " (transA " +
                     std::to_string(ctx.node().attr_int("transA", 0)) + ", transB " +
                     std::to_string(ctx.node().attr_int("transB", 0)) + ")");
  }
  const Shape batch_a(std::vector<Dim>(a.dims.begin(), a.dims.end() - 2));
  const Shape batch_b(std::vector<Dim>(b.dims.begin(), b.dims.end() - 2));
  std::optional<Shape> batch = broadcast_shapes(batch_a, batch_b);
  if (!batch) fail_op(ctx, "batch dimensions do not broadcast: " + operands);
  if (ctx.has_input(2)) {
    if (ctx.input_dtype(2) != y_dtype)
      fail_op(ctx, "C must be " + std::string(dtype_name(y_dtype)) + ", Y's type, not " +
                       std::string(dtype_name(ctx.input_dtype(2))));
    const Shape& c = ctx.input_shape(2);
    const bool per_column =
        c.rank_known && c.rank() == 1 && (!c.dims[0].is_static() || !n.is_static() || c.dims[0].value() == n.value());
    if (!per_column) fail_op(ctx, "C must be (N) = (" + n.to_string() + "), not " + c.to_string());
  }
  batch->dims.push_back(m);
  batch->dims.push_back(n);
  ctx.set_output(0, y_dtype, *batch);
}

OpCost fused_matmul_cost(const CostContext& ctx) {
  const Shape& a = ctx.inputs[0];
  if (!a.rank_known || a.rank() < 2) return {};
  const bool trans_a = ctx.node.attr_int("transA", 0) != 0;
  return matrix_product_cost(ctx, a.dims[a.dims.size() - (trans_a ? 2 : 1)],
                             ctx.inputs.size() > 2 && ctx.inputs[2].rank_known);  // the bias, as Gemm's
}

}  // namespace

void register_fused_matmul_op(OpRegistry& registry) {
  registry.add({.op_type = "FusedMatMul",
                .domain = kTrainingDomain,
                .min_inputs = 2,
                .max_inputs = 3,
                .input_kinds = {InputKind::Data, InputKind::Data, InputKind::Weight},
                .infer = &infer_fused_matmul,
                .cost = &fused_matmul_cost});
}

}  // namespace onnxtrain
