// Shape (opset 1, 13, 15: start/end) and Size: int64 views of an input's shape. Their outputs carry
// the input dims as known values, which is what lets Reshape chains over them infer symbolically.
#include <algorithm>

#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;
using namespace shape_ops;

// The [start, end) range of Shape-15 over a rank, clamped like a Python slice.
std::pair<int64_t, int64_t> shape_range(const Node& node, int64_t rank) {
  auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  int64_t start = clamp(node.attr_int("start", 0));
  int64_t end = clamp(node.attr_int("end", rank));
  return {start, std::max(start, end)};
}

void infer_shape(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  if (!in.rank_known) {
    ctx.set_output(0, DType::Int64, Shape({Dim::unknown()}));
    return;
  }
  auto [start, end] = shape_range(ctx.node(), in.rank());
  ctx.set_output(0, DType::Int64, Shape::of({end - start}));
  set_known_output(ctx, 0, DType::Int64, std::vector<Dim>(in.dims.begin() + start, in.dims.begin() + end));
}

std::vector<Tensor> fold_shape(const FoldContext& ctx) {
  const auto& sizes = ctx.inputs[0].sizes();
  auto [start, end] = shape_range(ctx.node, static_cast<int64_t>(sizes.size()));
  return {Tensor::vector_int64(std::vector<int64_t>(sizes.begin() + start, sizes.begin() + end))};
}

void infer_size(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  ctx.set_output(0, DType::Int64, Shape());
  if (in.rank_known) set_known_output(ctx, 0, DType::Int64, {dims_product(in.dims)});
}

std::vector<Tensor> fold_size(const FoldContext& ctx) { return {Tensor::scalar_int64(ctx.inputs[0].numel())}; }

}  // namespace

void register_shape_size_ops(OpRegistry& registry) {
  registry.add({.op_type = "Shape",
                .input_kinds = {InputKind::NonDifferentiable},
                .infer = infer_shape,
                .cost = no_flops,
                .fold = fold_shape});
  registry.add({.op_type = "Size",
                .input_kinds = {InputKind::NonDifferentiable},
                .infer = infer_size,
                .cost = no_flops,
                .fold = fold_size});
}

}  // namespace onnxtrain
