// Softmax and LogSoftmax. Before opset 13 the input is coerced to 2-D at `axis` (default 1) and
// normalised over every dim from `axis` on; from 13 over `axis` alone (default -1). The output has the
// input's shape either way; op_helpers::softmax_axes tells kernels and gradient rules which dims.
// Cost: ~5 FLOPs per element forward (max, subtract, exp, sum, divide), ~4 backward.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

void infer_softmax(InferContext& ctx) {
  require_floating(ctx, 0);
  const Shape& x = ctx.input_shape(0);
  if (x.rank_known) {
    if (x.rank() == 0) fail_op(ctx, "input must have at least one dim, got a scalar");
    checked_axis(ctx, ctx.node().attr_int("axis", ctx.opset() < 13 ? 1 : -1), x.rank());
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
}

OpSchema softmax_schema(const char* name) {
  return {.op_type = name,
          .input_kinds = {InputKind::Data},
          .infer = &infer_softmax,
          .cost = &flops_per_input_element<5, 4>};
}

}  // namespace

void register_softmax_ops(OpRegistry& registry) {
  registry.add(softmax_schema("Softmax"));
  registry.add(softmax_schema("LogSoftmax"));
}

}  // namespace onnxtrain
