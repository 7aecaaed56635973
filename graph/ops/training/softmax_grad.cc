// Backward ops of Softmax and LogSoftmax (domain ai.onnxtrain) over one axis (opset 13 semantics;
// the rules flatten older nodes' coerced 2-D view first), from the forward output Y:
//  - SoftmaxGrad(dY, Y) -> dX = Y ⊙ (dY − Σ_axis dY ⊙ Y)
//  - LogSoftmaxGrad(dY, Y) -> dX = dY − exp(Y) ⊙ Σ_axis dY
// Attribute axis (default -1). Cost: ~4 FLOPs per element.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

void infer_softmax_grad(InferContext& ctx) {
  require_floating(ctx, 0);
  require_same_dtype(ctx, 1, 0);
  const Shape& y = ctx.input_shape(1);
  if (y.rank_known) {
    if (y.rank() == 0) fail_op(ctx, "Y must have at least one dim, got a scalar");
    checked_axis(ctx, ctx.node().attr_int("axis", -1), y.rank());
  }
  ctx.set_output(0, ctx.input_dtype(0), y);
}

OpSchema softmax_grad_schema(const char* name) {
  return {.op_type = name,
          .domain = kTrainingDomain,
          .min_inputs = 2,
          .max_inputs = 2,
          .input_kinds = {InputKind::Data, InputKind::Data},
          .infer = &infer_softmax_grad,
          .cost = &flops_per_input_element<4, 0>};
}

}  // namespace

void register_softmax_grad_ops(OpRegistry& registry) {
  registry.add(softmax_grad_schema("SoftmaxGrad"));
  registry.add(softmax_grad_schema("LogSoftmaxGrad"));
}

}  // namespace onnxtrain
