// GatherNDGrad (ai.onnxtrain, opset 1): the gradient of GatherND. dX = zeros shaped x_shape, then every
// slice of dY is added into the slice of dX its index row names (repeated rows accumulate, negative
// coordinates count from the end). Inputs: dY, x_shape (1-D int64, known at inference), indices;
// attribute batch_dims.
//
// Its own op rather than ScatterND(zeros, indices, dY, reduction="add"): onnxtrain has no ScatterND, and
// like GatherGrad this takes x_shape instead of a zeros tensor, so the backward pass allocates dX once and
// the kernels can sum repeated rows in a fixed order (deterministic on CPU and GPU).
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;

void infer_gather_nd_grad(InferContext& ctx) {
  const std::optional<std::vector<Dim>> x = infer_index_grad_dx(ctx, "GatherND's data");
  if (!x) return;
  const auto rank = static_cast<int64_t>(x->size());
  const int64_t batch_dims = ctx.node().attr_int("batch_dims", 0);
  const Shape& indices = ctx.input_shape(2);
  if (batch_dims < 0 || batch_dims >= rank || (indices.rank_known && batch_dims >= indices.rank())) {
    fail_op(ctx, "batch_dims " + std::to_string(batch_dims) + " must be less than the ranks of x_shape " +
                     dims_to_string(*x) + " and indices " + indices.to_string());
  }
  const Shape& dy = ctx.input_shape(0);
  if (dy.rank_known && indices.rank_known && indices.dims.back().is_static()) {
    const int64_t k = indices.dims.back().value();
    if (k < 1 || k > rank - batch_dims || dy.rank() != indices.rank() - 1 + rank - batch_dims - k) {
      fail_op(ctx, "dY " + dy.to_string() + " is not GatherND's output for x_shape " + dims_to_string(*x) +
                       " and indices " + indices.to_string());
    }
  }
}

}  // namespace

void register_gather_nd_grad_op(OpRegistry& registry) {
  registry.add({.op_type = "GatherNDGrad",
                .domain = kTrainingDomain,
                .min_inputs = 3,
                .max_inputs = 3,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_gather_nd_grad,
                .cost = &flops_per_input_element<1, 0>});
}

}  // namespace onnxtrain
