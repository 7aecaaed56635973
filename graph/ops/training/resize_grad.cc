// ResizeGrad (ai.onnxtrain, opset 1): the gradient of Resize and Upsample. dX (shaped x_shape) gathers, for
// each input element, every dY element whose taps read it times the taps' weight product
// (kernels/resize_gather.h). Inputs: dY, x_shape (1-D int64), then the forward's roi, scales and sizes
// (each optional); attributes: the forward's, plus `legacy` = 1 for Upsample and Resize before opset 11.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"
#include "graph/resize_sampling.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;
using shape_ops::no_flops;

void infer_resize_grad(InferContext& ctx) {
  require_floating(ctx, 0);
  require_integer(ctx, 1);
  const ResizeSampling sampling = decode_resize_sampling(ctx.node().attributes, ctx.node().attr_int("legacy", 0) != 0);
  if (!sampling.error.empty()) fail_op(ctx, sampling.error);
  ctx.set_output(0, ctx.input_dtype(0), shape_from_shape_input(ctx, 1));
}

}  // namespace

void register_resize_grad_op(OpRegistry& registry) {
  registry.add({.op_type = "ResizeGrad",
                .domain = kTrainingDomain,
                .min_inputs = 2,
                .max_inputs = 5,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_resize_grad,
                .cost = no_flops});
}

}  // namespace onnxtrain
