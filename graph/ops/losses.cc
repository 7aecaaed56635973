// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss: scores (N,C) or (N,C,D1..Dk), int labels
// (N) or (N,D1..Dk), optional per-class weights (C). reduction none gives the per-element loss shaped
// like the labels, sum and mean a scalar; SoftmaxCrossEntropyLoss may also output log_prob (the scores'
// shape). Cost: ~4 FLOPs per score element forward, ~2 backward.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

void infer_loss(InferContext& ctx) {
  const bool sce = ctx.node().op_type == "SoftmaxCrossEntropyLoss";
  const std::string scores_name = sce ? "scores" : "input";
  const std::string labels_name = sce ? "labels" : "target";
  require_floating(ctx, 0);
  if (ctx.input_dtype(1) != DType::Int32 && ctx.input_dtype(1) != DType::Int64) {
    fail_op(ctx, labels_name + " must be int32 or int64, got " + std::string(dtype_name(ctx.input_dtype(1))));
  }
  if (ctx.has_input(2)) require_same_dtype(ctx, 2, 0);
  const std::string reduction = ctx.node().attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    fail_op(ctx, "reduction must be none, sum or mean, got '" + reduction + "'");
  }
  const Shape& scores = ctx.input_shape(0);
  const Shape& labels = ctx.input_shape(1);
  Shape per_element = labels;  // (N,D1..Dk)
  if (scores.rank_known) {
    if (scores.rank() < 2) {
      fail_op(ctx, scores_name + " must be (N,C) or (N,C,D1,...), got shape " + scores.to_string());
    }
    Shape expected = scores;
    expected.dims.erase(expected.dims.begin() + 1);
    if (labels.rank_known) {
      bool ok = labels.rank() == expected.rank();
      for (int64_t i = 0; ok && i < labels.rank(); ++i) {
        const Dim& l = labels.dims[i];
        const Dim& e = expected.dims[i];
        if (l.is_static() && e.is_static() && l.value() != e.value()) ok = false;
        if (!l.is_static()) per_element.dims[i] = e;
      }
      if (!ok) {
        fail_op(ctx, labels_name + " have shape " + labels.to_string() + " but " + scores_name + " " +
                         scores.to_string() + " need " + expected.to_string());
      }
    } else {
      per_element = expected;
    }
    if (ctx.has_input(2)) {
      require_vector_of(ctx, 2, "weights", scores.dims[1],
                        "one value per class of the " + scores_name + " " + scores.to_string());
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), reduction == "none" ? per_element : Shape());
  ctx.set_output(1, ctx.input_dtype(0), scores);
}

OpSchema loss_schema(const char* name, int max_outputs) {
  return {.op_type = name,
          .min_inputs = 2,
          .max_inputs = 3,
          .min_outputs = 1,
          .max_outputs = max_outputs,
          .input_kinds = {InputKind::Data, InputKind::NonDifferentiable, InputKind::NonDifferentiable},
          .infer = &infer_loss,
          .cost = &flops_per_input_element<4, 2>};
}

}  // namespace

void register_loss_ops(OpRegistry& registry) {
  registry.add(loss_schema("SoftmaxCrossEntropyLoss", 2));
  registry.add(loss_schema("NegativeLogLikelihoodLoss", 1));
}

}  // namespace onnxtrain
