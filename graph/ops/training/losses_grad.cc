// Backward ops of the losses (domain ai.onnxtrain, opset 1); attributes reduction and ignore_index as on
// the forward node, labels/target int32 or int64, weights optional (C):
//  - SoftmaxCrossEntropyLossGrad(dLoss, log_prob, labels, [weights]) → dScores, shaped like log_prob;
//  - NegativeLogLikelihoodLossGrad(dLoss, target, input_shape, [weights]) → dInput of shape input_shape.
// dLoss is the labels' shape for reduction none, else a scalar. Cost: ~2 FLOPs per output element.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

void check_common(InferContext& ctx, size_t labels, size_t weights) {
  require_floating(ctx, 0);
  if (ctx.input_dtype(labels) != DType::Int32 && ctx.input_dtype(labels) != DType::Int64) {
    fail_op(ctx, "labels must be int32 or int64, got " + std::string(dtype_name(ctx.input_dtype(labels))));
  }
  if (ctx.has_input(weights)) require_same_dtype(ctx, weights, 0);
  const std::string reduction = ctx.node().attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    fail_op(ctx, "reduction must be none, sum or mean, got '" + reduction + "'");
  }
  const Shape& dloss = ctx.input_shape(0);
  if (reduction != "none" && dloss.rank_known && dloss.rank() != 0) {
    fail_op(ctx, "dLoss must be a scalar for reduction '" + reduction + "', got shape " + dloss.to_string());
  }
}

void infer_softmax_cross_entropy_loss_grad(InferContext& ctx) {
  check_common(ctx, 2, 3);
  require_same_dtype(ctx, 1, 0);
  ctx.set_output(0, ctx.input_dtype(1), ctx.input_shape(1));
}

void infer_negative_log_likelihood_loss_grad(InferContext& ctx) {
  check_common(ctx, 1, 3);
  if (ctx.input_dtype(2) != DType::Int64) fail_op(ctx, "input_shape must be int64");
  ctx.set_output(0, ctx.input_dtype(0), shape_from_shape_input(ctx, 2));
}

}  // namespace

void register_loss_grad_ops(OpRegistry& registry) {
  registry.add(
      {.op_type = "SoftmaxCrossEntropyLossGrad",
       .domain = kTrainingDomain,
       .min_inputs = 3,
       .max_inputs = 4,
       .input_kinds = {InputKind::Data, InputKind::Data, InputKind::NonDifferentiable, InputKind::NonDifferentiable},
       .infer = &infer_softmax_cross_entropy_loss_grad,
       .cost = &flops_per_output_element<2, 0>});
  registry.add({.op_type = "NegativeLogLikelihoodLossGrad",
                .domain = kTrainingDomain,
                .min_inputs = 3,
                .max_inputs = 4,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable, InputKind::NonDifferentiable,
                                InputKind::NonDifferentiable},
                .infer = &infer_negative_log_likelihood_loss_grad,
                .cost = &flops_per_output_element<1, 0>});
}

}  // namespace onnxtrain
