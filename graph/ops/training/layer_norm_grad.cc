// ai.onnxtrain::LayerNormalizationGrad(dY, X, Scale) → dX, dScale, dBias (each optional): the backward
// of LayerNormalization over X's dims from `axis` on. dScale and dBias are shaped like those normalised
// dims (summed over the leading ones only); the gradient rule sums them further down to Scale's and B's
// own shapes when those broadcast. Attributes axis (-1) and epsilon (1e-5).
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

void infer_layer_norm_grad(InferContext& ctx) {
  const Shape& x = infer_norm_grad_dx(ctx, /*scale_like_x=*/true);
  if (!x.rank_known) return set_scale_bias_grads(ctx, ctx.input_dtype(1), Shape::unknown_rank());
  const int64_t axis = checked_axis(ctx, ctx.node().attr_int("axis", -1), x.rank());
  const Shape normalized(std::vector<Dim>(x.dims.begin() + axis, x.dims.end()));
  const Shape& scale = ctx.input_shape(2);
  if (scale.rank_known && !broadcasts_onto(scale, normalized)) {
    fail_op(ctx, "Scale of shape " + scale.to_string() + " does not match the normalized dims " +
                     normalized.to_string() + " of the input " + x.to_string());
  }
  set_scale_bias_grads(ctx, ctx.input_dtype(1), normalized);
}

}  // namespace

void register_layer_norm_grad_op(OpRegistry& registry) {
  registry.add({.op_type = "LayerNormalizationGrad",
                .domain = kTrainingDomain,
                .min_inputs = 3,
                .max_inputs = 3,
                .min_outputs = 1,
                .max_outputs = 3,
                .input_kinds = {InputKind::Data, InputKind::Data, InputKind::Weight},
                .infer = &infer_layer_norm_grad,
                .cost = &flops_per_input_element<8, 0>});
}

}  // namespace onnxtrain
