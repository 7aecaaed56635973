#include "graph/autodiff/rules/reduce_common.h"

#include <algorithm>

namespace onnxtrain::gradient_rules {

namespace {

// ReduceSum takes axes as an input from opset 13, the other Reduce* ops from 18.
int axes_input_since(const Node& node) { return node.op_type == "ReduceSum" ? 13 : 18; }

}  // namespace

std::vector<int64_t> reduced_axes(const GradientContext& ctx) {
  const Node& node = ctx.node();
  const int64_t rank = ctx.shape(ctx.input(0)).rank();
  const bool as_input = node.opset >= axes_input_since(node);
  std::vector<int64_t> axes;
  if (!as_input) {
    axes = node.attr_ints("axes");
  } else if (ctx.has_input(1)) {
    const Value& a = ctx.value(ctx.input(1));
    if (!a.data) ctx.fail("the axes input must be a constant to differentiate through the reduction");
    axes = a.data->to_int64();
  }
  if (axes.empty()) {
    if (as_input && node.attr_int("noop_with_empty_axes", 0) != 0) return {};
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  std::sort(axes.begin(), axes.end());
  return axes;
}

ValueId broadcast_to_input(GradientContext& ctx, ValueId g) {
  const std::vector<int64_t> axes = reduced_axes(ctx);
  if (axes.empty()) return g;
  if (ctx.node().attr_int("keepdims", 1) == 0) g = ctx.emit("Unsqueeze", {g, ctx.int64s(axes)});
  return ctx.emit("Expand", {g, ctx.shape_of(ctx.input(0))});
}

ValueId with_reduced_dims(GradientContext& ctx, ValueId v) {
  const std::vector<int64_t> axes = reduced_axes(ctx);
  if (axes.empty() || ctx.node().attr_int("keepdims", 1) != 0) return v;
  return ctx.emit("Unsqueeze", {v, ctx.int64s(axes)});
}

bool is_identity_reduction(const GradientContext& ctx) { return reduced_axes(ctx).empty(); }

}  // namespace onnxtrain::gradient_rules
