// SliceGrad (ai.onnxtrain, opset 1): the gradient of Slice. dX = zeros shaped x_shape with dY written into
// the positions Slice(x, starts, ends, axes, steps) read (numpy clamping, negative steps; graph/shape.h
// numpy_slice). Inputs: dY, x_shape (1-D int64, known at inference), starts, ends, [axes], [steps].
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;

void infer_slice_grad(InferContext& ctx) {
  require_floating(ctx, 0);
  for (size_t i = 1; i < ctx.input_count(); ++i)
    if (ctx.has_input(i) && ctx.input_dtype(i) != DType::Int64 && ctx.input_dtype(i) != DType::Int32)
      fail_op(ctx, "input " + std::to_string(i) + " must be int32 or int64");
  const DType dtype = ctx.input_dtype(0);
  if (auto x = ctx.input_known(1)) {
    const Shape& dy = ctx.input_shape(0);
    if (dy.rank_known && dy.rank() != static_cast<int64_t>(x->size())) {
      fail_op(ctx, "dY " + dy.to_string() + " and x_shape " + dims_to_string(*x) + " differ in rank");
    }
  }
  ctx.set_output(0, dtype, shape_from_shape_input(ctx, 1));
}

}  // namespace

void register_slice_grad_op(OpRegistry& registry) {
  registry.add({.op_type = "SliceGrad",
                .domain = kTrainingDomain,
                .min_inputs = 4,
                .max_inputs = 6,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_slice_grad,
                .cost = shape_ops::no_flops});
}

}  // namespace onnxtrain
