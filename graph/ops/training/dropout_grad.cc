// DropoutGrad (ai.onnxtrain, opset 1): the gradient of Dropout in training mode, dX = dY * mask / (1 - ratio).
// Inputs: dY, mask (bool, or dY's type as before opset 10), [ratio] (float scalar, default 0.5),
// [training_mode] (bool scalar, default true; false gives dX = dY, for a Dropout whose mode is not constant).
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;

void infer_dropout_grad(InferContext& ctx) {
  require_floating(ctx, 0);
  if (ctx.input_dtype(1) != DType::Bool && ctx.input_dtype(1) != ctx.input_dtype(0)) {
    fail_op(ctx, "mask must be bool or dY's type, got " + std::string(dtype_name(ctx.input_dtype(1))));
  }
  const Shape& dy = ctx.input_shape(0);
  const Shape& mask = ctx.input_shape(1);
  if (dy.rank_known && mask.rank_known && dy.is_static() && mask.is_static() && !(dy == mask)) {
    fail_op(ctx, "mask " + mask.to_string() + " must have dY's shape " + dy.to_string());
  }
  if (ctx.has_input(2)) {
    require_floating(ctx, 2);
    require_scalar(ctx, 2, "ratio");
  }
  if (ctx.has_input(3)) {
    if (ctx.input_dtype(3) != DType::Bool) fail_op(ctx, "training_mode must be bool");
    require_scalar(ctx, 3, "training_mode");
  }
  ctx.set_output(0, ctx.input_dtype(0), dy);
}

}  // namespace

void register_dropout_grad_op(OpRegistry& registry) {
  registry.add({.op_type = "DropoutGrad",
                .domain = kTrainingDomain,
                .min_inputs = 2,
                .max_inputs = 4,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_dropout_grad,
                .cost = &flops_per_input_element<2, 0>});
}

}  // namespace onnxtrain
