// Dropout: the output has the input's shape and type. The ratio is an attribute before opset 12 and an
// optional scalar input from 12, with an optional bool training_mode input. The optional mask has the
// input's type in opsets 7–9 and is bool from 10. Cost: 1 FLOP per element forward and backward.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

void check_ratio(const InferContext& ctx, double ratio) {
  if (!(ratio >= 0 && ratio < 1)) fail_op(ctx, "ratio must be in [0, 1), got " + std::to_string(ratio));
}

void infer_dropout(InferContext& ctx) {
  require_floating(ctx, 0);
  if (ctx.opset() < 12) {
    if (ctx.has_input(1) || ctx.has_input(2)) fail_op(ctx, "ratio is an attribute before opset 12, not an input");
    check_ratio(ctx, ctx.node().attr_float("ratio", 0.5));
  } else {
    if (ctx.has_input(1)) {
      require_floating(ctx, 1);
      require_scalar(ctx, 1, "ratio");
      if (const Tensor* ratio = ctx.input_constant(1); ratio && ratio->numel() == 1)
        check_ratio(ctx, ratio->to_double()[0]);
    }
    if (ctx.has_input(2)) {
      if (ctx.input_dtype(2) != DType::Bool) {
        fail_op(ctx, "training_mode must be bool, got " + std::string(dtype_name(ctx.input_dtype(2))));
      }
      require_scalar(ctx, 2, "training_mode");
    }
  }
  const Shape& x = ctx.input_shape(0);
  ctx.set_output(0, ctx.input_dtype(0), x);
  ctx.set_output(1, ctx.opset() < 10 ? ctx.input_dtype(0) : DType::Bool, x);
}

}  // namespace

void register_dropout_op(OpRegistry& registry) {
  registry.add({.op_type = "Dropout",
                .min_inputs = 1,
                .max_inputs = 3,
                .min_outputs = 1,
                .max_outputs = 2,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable, InputKind::NonDifferentiable},
                .infer = &infer_dropout,
                .cost = &flops_per_input_element<1, 1>});
}

}  // namespace onnxtrain
