// LayerNormalization (opset 17): normalises X over the dims from `axis` on; Scale and the optional B
// broadcast onto those dims. Optional outputs Mean and InvStdDev keep X's leading dims with 1 from
// `axis` on and have the stash_type element type. Cost: ~5 FLOPs per element forward, ~8 backward.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

DType stash_dtype(const InferContext& ctx) {
  const int64_t stash_type = ctx.node().attr_int("stash_type", 1);
  switch (stash_type) {  // ONNX TensorProto element type codes
    case 1:
      return DType::Float32;
    case 10:
      return DType::Float16;
    case 11:
      return DType::Float64;
    case 16:
      return DType::BFloat16;
    default:
      fail_op(ctx,
              "stash_type must be a floating-point type code (1, 10, 11 or 16), got " + std::to_string(stash_type));
  }
}

// Scale and B broadcast unidirectionally onto the normalised dims.
void check_affine(const InferContext& ctx, size_t input, const Shape& normalized, const Shape& x, int64_t axis) {
  if (!ctx.has_input(input)) return;
  const Shape& s = ctx.input_shape(input);
  if (s.rank_known && !broadcasts_onto(s, normalized)) {
    fail_op(ctx, std::string(input == 1 ? "Scale" : "B") + " of shape " + s.to_string() +
                     " does not match the normalized dims " + normalized.to_string() + " of the input " +
                     x.to_string() + " (axis " + std::to_string(axis) + ")");
  }
}

void infer_layer_norm(InferContext& ctx) {
  require_floating(ctx, 0);
  require_same_dtype(ctx, 1, 0);
  if (ctx.has_input(2)) require_same_dtype(ctx, 2, 0);
  const DType stash = stash_dtype(ctx);
  const Shape& x = ctx.input_shape(0);
  if (!x.rank_known) {
    for (size_t i = 0; i < 3; ++i) ctx.set_output(i, i == 0 ? ctx.input_dtype(0) : stash, Shape::unknown_rank());
    return;
  }
  const int64_t axis = checked_axis(ctx, ctx.node().attr_int("axis", -1), x.rank());
  const Shape normalized(std::vector<Dim>(x.dims.begin() + axis, x.dims.end()));
  check_affine(ctx, 1, normalized, x, axis);
  check_affine(ctx, 2, normalized, x, axis);
  Shape stats = x;
  for (int64_t i = axis; i < x.rank(); ++i) stats.dims[i] = 1;
  ctx.set_output(0, ctx.input_dtype(0), x);
  ctx.set_output(1, stash, stats);
  ctx.set_output(2, stash, stats);
}

}  // namespace

void register_layer_norm_op(OpRegistry& registry) {
  registry.add({.op_type = "LayerNormalization",
                .min_inputs = 2,
                .max_inputs = 3,
                .min_outputs = 1,
                .max_outputs = 3,
                .input_kinds = {InputKind::Data, InputKind::Weight, InputKind::Weight},
                .infer = &infer_layer_norm,
                .cost = &flops_per_input_element<5, 8>});
}

}  // namespace onnxtrain
