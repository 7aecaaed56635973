// ai.onnxtrain::BatchNormalizationGrad(dY, X, scale, mean, var) → dX, dScale, dBias (each optional):
// the backward of BatchNormalization over X (N,F,inner) with F = scale's element count (the channels, or
// every non-batch element for opset 7's spatial=0). training_mode=1: the forward used the batch's own
// statistics, which the kernels recompute from X (mean/var are then ignored); 0: mean/var are the
// running statistics, constants of the forward. Attributes epsilon (1e-5) and training_mode (0). With
// fused_activation "Relu" (graph/autodiff/batch_norm_relu.h) a sixth input Y = Relu(BN(X)), and dY is the
// gradient of that Y: it counts only where Y > 0.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

void infer_batch_norm_grad(InferContext& ctx) {
  const Shape& x = infer_norm_grad_dx(ctx, /*scale_like_x=*/false);
  for (size_t i = 2; i < 5; ++i) require_floating(ctx, i);  // scale and mean/var may differ from X (opset 15)
  if (x.rank_known && x.rank() == 0) fail_op(ctx, "X must be (N,C,D1,...), got a scalar");
  set_scale_bias_grads(ctx, ctx.input_dtype(2), ctx.input_shape(2));
}

}  // namespace

void register_batch_norm_grad_op(OpRegistry& registry) {
  registry.add({.op_type = "BatchNormalizationGrad",
                .domain = kTrainingDomain,
                .min_inputs = 5,
                .max_inputs = 6,
                .min_outputs = 1,
                .max_outputs = 3,
                .input_kinds = {InputKind::Data, InputKind::Data, InputKind::Weight, InputKind::State, InputKind::State,
                                InputKind::Data},
                .infer = &infer_batch_norm_grad,
                .cost = &flops_per_input_element<8, 0>});
}

}  // namespace onnxtrain
