// MatMul with numpy's rules: a 1-D A is a row (its dim removed from the result), a 1-D B a column,
// leading batch dims broadcast. Cost: 2·K per output element forward, twice that backward.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

void infer_matmul(InferContext& ctx) {
  require_numeric(ctx, 0);
  require_same_dtype(ctx, 1, 0);
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  if (!a.rank_known || !b.rank_known) return ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
  if (a.rank() == 0 || b.rank() == 0) {
    fail_op(ctx, "operands must have at least one dim: " + a.to_string() + " x " + b.to_string());
  }
  const Dim k_a = a.dims.back();
  const Dim k_b = b.rank() == 1 ? b.dims[0] : b.dims[b.dims.size() - 2];
  if (k_a.is_static() && k_b.is_static() && k_a.value() != k_b.value()) {
    fail_op(ctx, "inner dimensions differ: " + a.to_string() + " x " + b.to_string());
  }
  const Shape batch_a(std::vector<Dim>(a.dims.begin(), a.dims.end() - std::min<int64_t>(a.rank(), 2)));
  const Shape batch_b(std::vector<Dim>(b.dims.begin(), b.dims.end() - std::min<int64_t>(b.rank(), 2)));
  auto batch = broadcast_shapes(batch_a, batch_b);
  if (!batch) fail_op(ctx, "batch dimensions do not broadcast: " + a.to_string() + " x " + b.to_string());
  Shape out = *batch;
  if (a.rank() >= 2) out.dims.push_back(a.dims[a.dims.size() - 2]);
  if (b.rank() >= 2) out.dims.push_back(b.dims.back());
  ctx.set_output(0, ctx.input_dtype(0), out);
}

OpCost matmul_cost(const CostContext& ctx) {
  const Shape& a = ctx.inputs[0];
  if (!a.rank_known || a.rank() == 0) return {};
  return matrix_product_cost(ctx, a.dims.back());
}

}  // namespace

void register_matmul_op(OpRegistry& registry) {
  registry.add({.op_type = "MatMul",
                .min_inputs = 2,
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::Data},
                .infer = &infer_matmul,
                .cost = &matmul_cost});
}

}  // namespace onnxtrain
