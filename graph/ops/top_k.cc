// TopK (opset 1, 10, 11): the K largest (largest = 1, the default) or smallest elements of X along `axis`
// (default -1) and their int64 indices. Opset 1 gives K as the attribute k; from opset 10 it is input 1, a
// one-element int64 tensor. Both outputs have X's shape with K along the axis; Values has X's dtype.
// onnxtrain always returns them in order (sorted = 1, which sorted = 0 also allows), equal values by lower
// index first, as ONNX's reference does. The gradient scatters dValues back to the positions Indices
// names (rules/top_k.cc). Comparisons only: no FLOPs counted.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;

void infer_top_k(InferContext& ctx) {
  require_numeric(ctx, 0);
  const Shape& x = ctx.input_shape(0);
  std::optional<int64_t> k;
  std::optional<Dim> k_dim;  // K known only as a size of the graph's shapes
  if (ctx.opset() < 10) {
    k = ctx.node().attr_int("k", -1);
  } else {
    if (!ctx.has_input(1)) fail_op(ctx, "input 1 (K) is required from opset 10");
    require_integer(ctx, 1);
    if (auto values = ctx.input_ints(1)) {
      if (values->size() != 1) fail_op(ctx, "K must hold one value, got " + std::to_string(values->size()));
      k = (*values)[0];
    } else if (auto known = ctx.input_known(1); known && known->size() == 1) {
      // K from the shapes, e.g. a whole axis of a dynamic batch (a packed sequence's lengths sorted:
      // TopK(lengths, Shape(lengths)[0])): the outputs keep that symbol, where (?) left them unrunnable.
      k_dim = (*known)[0];
    }
  }
  if (k && *k < 0) fail_op(ctx, "K must be 0 or more, got " + std::to_string(*k));
  Shape out = x;
  if (x.rank_known) {
    if (x.rank() == 0) fail_op(ctx, "X must have rank >= 1, got a scalar");
    const int64_t axis = checked_axis(ctx, ctx.node().attr_int("axis", -1), x.rank());
    if (k && x.dims[axis].is_static() && *k > x.dims[axis].value()) {
      fail_op(ctx, "K " + std::to_string(*k) + " is more than the " + std::to_string(x.dims[axis].value()) +
                       " elements along axis " + std::to_string(axis) + " of X " + x.to_string());
    }
    out.dims[axis] = k ? Dim(*k) : k_dim.value_or(Dim());
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
  ctx.set_output(1, DType::Int64, out);
}

}  // namespace

void register_top_k_op(OpRegistry& registry) {
  registry.add({.op_type = "TopK",
                .min_inputs = 1,
                .max_inputs = 2,
                .min_outputs = 2,
                .max_outputs = 2,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_top_k,
                .cost = shape_ops::no_flops});
}

}  // namespace onnxtrain
