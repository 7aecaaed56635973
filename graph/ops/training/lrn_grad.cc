// LRNGrad(dY, X) -> dX (domain ai.onnxtrain), the backward op of LRN, with LRN's attributes (size,
// alpha, beta, bias). With s_c = bias + alpha/size · Σ_{j∈W(c)} x_j² and y_c = x_c · s_c^-β:
// dx_j = dy_j · s_j^-β − 2β·alpha/size · x_j · Σ_{c: j∈W(c)} dy_c · x_c · s_c^(-β-1).
// Cost: twice the forward's 2·size + 4 FLOPs per element.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

void infer_lrn_grad(InferContext& ctx) {
  require_floating(ctx, 0);
  require_same_dtype(ctx, 1, 0);
  const int64_t size = ctx.node().attr_int("size", 0);
  if (size < 1) fail_op(ctx, "the size attribute is required and must be >= 1, got " + std::to_string(size));
  require_spatial_input(ctx, ctx.input_shape(1));
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(1));
}

OpCost lrn_grad_cost(const CostContext& ctx) {
  const double per_element = 2.0 * (2.0 * static_cast<double>(ctx.node.attr_int("size", 1)) + 4);
  return {per_element * static_cast<double>(ctx.input_numel(0)), 0};
}

}  // namespace

void register_lrn_grad_op(OpRegistry& registry) {
  registry.add({.op_type = "LRNGrad",
                .domain = kTrainingDomain,
                .min_inputs = 2,
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::Data},
                .infer = &infer_lrn_grad,
                .cost = &lrn_grad_cost});
}

}  // namespace onnxtrain
