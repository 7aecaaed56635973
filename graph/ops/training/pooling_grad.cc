// Backward ops of the windowed pools (domain ai.onnxtrain), emitted by the MaxPool, AveragePool and
// GlobalMaxPool gradient rules; both carry the forward node's attributes (kernel_shape, strides, pads or
// auto_pad, dilations, ceil_mode, ...), which kernels resolve exactly as the forward kernels do, with
// dY's spatial sizes as the pooled ones.
//  - MaxPoolGrad(dY, X) -> dX: each dY element goes to the first maximal X element of its window.
//  - AveragePoolGrad(dY, x_shape) -> dX: each dY element spread evenly over the elements its window
//    averaged (count_include_pad as in the forward); x_shape is X's shape as a 1-D int64 tensor.
// Cost: one FLOP per window element per dY element.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

void require_pool_attributes(InferContext& ctx) {
  if (!ctx.node().has_attribute("kernel_shape")) fail_op(ctx, "the kernel_shape attribute is required");
}

void infer_max_pool_grad(InferContext& ctx) {
  require_pool_attributes(ctx);
  require_floating(ctx, 0);
  require_same_dtype(ctx, 1, 0);
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(1));
}

void infer_average_pool_grad(InferContext& ctx) {
  require_pool_attributes(ctx);
  require_floating(ctx, 0);
  require_integer(ctx, 1);
  ctx.set_output(0, ctx.input_dtype(0), shape_from_shape_input(ctx, 1));
}

OpCost pool_grad_cost(const CostContext& ctx) {
  int64_t window = 1;
  for (int64_t k : ctx.node.attr_ints("kernel_shape")) window *= k;
  return {static_cast<double>(window) * static_cast<double>(ctx.input_numel(0)), 0};
}

}  // namespace

void register_pooling_grad_ops(OpRegistry& registry) {
  registry.add({.op_type = "MaxPoolGrad",
                .domain = kTrainingDomain,
                .min_inputs = 2,
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::Data},
                .infer = &infer_max_pool_grad,
                .cost = &pool_grad_cost});
  registry.add({.op_type = "AveragePoolGrad",
                .domain = kTrainingDomain,
                .min_inputs = 2,
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = &infer_average_pool_grad,
                .cost = &pool_grad_cost});
}

}  // namespace onnxtrain
