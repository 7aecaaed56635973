// LRN: local response normalisation across `size` neighbouring channels of X (N,C,D1..Dn); the output
// has X's shape. Cost: 2·size + 4 FLOPs per element forward (window sum of squares, pow, divide),
// twice that backward.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

void infer_lrn(InferContext& ctx) {
  require_floating(ctx, 0);
  const Node& node = ctx.node();
  if (!node.has_attribute("size")) fail_op(ctx, "the size attribute is required");
  const int64_t size = node.attr_int("size", 0);
  if (size < 1) fail_op(ctx, "size must be >= 1, got " + std::to_string(size));
  const Shape& x = ctx.input_shape(0);
  require_spatial_input(ctx, x);
  ctx.set_output(0, ctx.input_dtype(0), x);
}

OpCost lrn_cost(const CostContext& ctx) {
  const double per_element = 2.0 * static_cast<double>(ctx.node.attr_int("size", 1)) + 4;
  const double forward = per_element * static_cast<double>(ctx.input_numel(0));
  return {forward, 2 * forward};
}

}  // namespace

void register_lrn_op(OpRegistry& registry) {
  registry.add({.op_type = "LRN", .input_kinds = {InputKind::Data}, .infer = &infer_lrn, .cost = &lrn_cost});
}

}  // namespace onnxtrain
