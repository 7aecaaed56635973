// PadGrad (ai.onnxtrain, opset 1): the gradient of Pad in reflect, edge or wrap mode (constant mode too).
// dX = zeros shaped x_shape, then every dY element is added into the x element that Pad copied it from
// (none for the constant border). Inputs: dY, x_shape (1-D int64, known at inference), pads
// ([begins..., ends...] over every axis); attribute mode.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;

void infer_pad_grad(InferContext& ctx) {
  require_floating(ctx, 0);
  require_integer(ctx, 1);
  require_integer(ctx, 2);
  const std::string mode = ctx.node().attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap") {
    fail_op(ctx, "unknown mode '" + mode + "' (expected constant, reflect, edge or wrap)");
  }
  const DType dtype = ctx.input_dtype(0);
  auto x = ctx.input_known(1);
  if (!x) return ctx.set_output(0, dtype, shape_from_shape_input(ctx, 1));
  if (auto pads = ctx.input_ints(2); pads && pads->size() != 2 * x->size()) {
    fail_op(ctx, "pads " + ints_to_string(*pads) + " must give a begin and an end for each of the " +
                     std::to_string(x->size()) + " axes of x_shape " + dims_to_string(*x));
  }
  ctx.set_output(0, dtype, Shape(*x));
}

}  // namespace

void register_pad_grad_op(OpRegistry& registry) {
  registry.add({.op_type = "PadGrad",
                .domain = kTrainingDomain,
                .min_inputs = 3,
                .max_inputs = 3,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_pad_grad,
                .cost = &flops_per_input_element<1, 0>});
}

}  // namespace onnxtrain
