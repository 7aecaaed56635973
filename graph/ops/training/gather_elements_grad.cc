// GatherElementsGrad (ai.onnxtrain, opset 1): the gradient of GatherElements. dX = zeros shaped x_shape,
// then for every index position p in row-major order: dX[p with the coordinate along `axis` replaced by
// indices[p]] += dY[p] (repeated indices accumulate, negative ones count from the end). Inputs: dY (the
// indices' shape), x_shape (1-D int64, known at inference), indices; attribute axis.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;

void infer_gather_elements_grad(InferContext& ctx) {
  const std::optional<std::vector<Dim>> x = infer_index_grad_dx(ctx, "GatherElements' data");
  if (!x) return;
  const auto rank = static_cast<int64_t>(x->size());
  checked_axis(ctx, ctx.node().attr_int("axis", 0), rank);
  const Shape& dy = ctx.input_shape(0);
  const Shape& indices = ctx.input_shape(2);
  if ((dy.rank_known && dy.rank() != rank) || (indices.rank_known && indices.rank() != rank)) {
    fail_op(ctx, "dY " + dy.to_string() + " and indices " + indices.to_string() + " must have the rank of x_shape " +
                     dims_to_string(*x));
  }
}

}  // namespace

void register_gather_elements_grad_op(OpRegistry& registry) {
  registry.add({.op_type = "GatherElementsGrad",
                .domain = kTrainingDomain,
                .min_inputs = 3,
                .max_inputs = 3,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_gather_elements_grad,
                .cost = &flops_per_input_element<1, 0>});
}

}  // namespace onnxtrain
