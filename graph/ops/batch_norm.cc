// BatchNormalization (opsets 7/9/14/15) and InstanceNormalization over X (N,C,D1..Dn) with per-channel
// vectors. BatchNormalization's extra outputs: before opset 14 mean, var, saved_mean, saved_var (their
// presence means training); from 14 running_mean and running_var, only with training_mode=1.
// Cost: ~5 FLOPs per element forward, ~8 backward.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

constexpr const char* kBatchNormInputs[] = {"X", "scale", "B", "input_mean", "input_var"};

void infer_batch_norm(InferContext& ctx) {
  require_floating(ctx, 0);
  const int opset = ctx.opset();
  for (size_t i = 1; i < 5; ++i) {
    if (opset < 15) {
      require_same_dtype(ctx, i, 0);
    } else {
      require_floating(ctx, i);  // from 15 scale/B and mean/var may use other float types than X
    }
  }
  if (opset >= 15) {
    require_same_dtype(ctx, 2, 1);
    require_same_dtype(ctx, 4, 3);
  }
  const Shape& x = ctx.input_shape(0);
  if (x.rank_known && x.rank() == 0) fail_op(ctx, "input must be (N,C,D1,...), got a scalar");
  // A 1-D input is (N) with one channel.
  const Dim channels = !x.rank_known ? Dim::unknown() : x.rank() == 1 ? Dim(1) : x.dims[1];
  const bool per_channel = opset >= 9 || ctx.node().attr_int("spatial", 1) != 0;  // spatial=0 (opset 7): (C,D1,...)
  if (per_channel) {
    for (size_t i = 1; i < 5; ++i) {
      require_vector_of(ctx, i, kBatchNormInputs[i], channels, "one value per channel of the input " + x.to_string());
    }
  }
  const Shape stats = per_channel ? Shape({channels}) : ctx.input_shape(3);
  ctx.set_output(0, ctx.input_dtype(0), x);
  if (opset >= 14) {
    if (ctx.output_count() > 3) fail_op(ctx, "has at most 3 outputs from opset 14 (Y, running_mean, running_var)");
    if (!batch_norm_training(ctx.node()) && (ctx.has_output(1) || ctx.has_output(2))) {
      fail_op(ctx, "the running_mean and running_var outputs exist only in training mode (training_mode=1)");
    }
    ctx.set_output(1, ctx.input_dtype(3), stats);
    ctx.set_output(2, ctx.input_dtype(4), stats);
  } else {
    for (size_t i = 1; i < 5; ++i) ctx.set_output(i, ctx.input_dtype(0), stats);
  }
}

void infer_instance_norm(InferContext& ctx) {
  require_floating(ctx, 0);
  require_same_dtype(ctx, 1, 0);
  require_same_dtype(ctx, 2, 0);
  const Shape& x = ctx.input_shape(0);
  require_spatial_input(ctx, x);
  const Dim channels = x.rank_known ? x.dims[1] : Dim::unknown();
  require_vector_of(ctx, 1, "scale", channels, "one value per channel of the input " + x.to_string());
  require_vector_of(ctx, 2, "B", channels, "one value per channel of the input " + x.to_string());
  ctx.set_output(0, ctx.input_dtype(0), x);
}

constexpr auto normalization_cost = &flops_per_input_element<5, 8>;

}  // namespace

void register_batch_norm_ops(OpRegistry& registry) {
  registry.add(
      {.op_type = "BatchNormalization",
       .min_inputs = 5,
       .max_inputs = 5,
       .min_outputs = 1,
       .max_outputs = 5,
       .input_kinds = {InputKind::Data, InputKind::Weight, InputKind::Weight, InputKind::State, InputKind::State},
       .infer = &infer_batch_norm,
       .cost = normalization_cost});
  registry.add({.op_type = "InstanceNormalization",
                .min_inputs = 3,
                .max_inputs = 3,
                .input_kinds = {InputKind::Data, InputKind::Weight, InputKind::Weight},
                .infer = &infer_instance_norm,
                .cost = normalization_cost});
}

}  // namespace onnxtrain
