// ai.onnxtrain::InstanceNormalizationGrad(dY, X, scale) → dX, dScale, dBias (each optional): the
// backward of InstanceNormalization over X (N,C,D1..Dn), each (n, c) plane normalised by its own
// statistics. Attribute epsilon (1e-5).
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

void infer_instance_norm_grad(InferContext& ctx) {
  const Shape& x = infer_norm_grad_dx(ctx, /*scale_like_x=*/true);
  require_spatial_input(ctx, x);
  const Dim channels = x.rank_known ? x.dims[1] : Dim::unknown();
  require_vector_of(ctx, 2, "scale", channels, "one value per channel of the input " + x.to_string());
  set_scale_bias_grads(ctx, ctx.input_dtype(2), ctx.input_shape(2));
}

}  // namespace

void register_instance_norm_grad_op(OpRegistry& registry) {
  registry.add({.op_type = "InstanceNormalizationGrad",
                .domain = kTrainingDomain,
                .min_inputs = 3,
                .max_inputs = 3,
                .min_outputs = 1,
                .max_outputs = 3,
                .input_kinds = {InputKind::Data, InputKind::Data, InputKind::Weight},
                .infer = &infer_instance_norm_grad,
                .cost = &flops_per_input_element<8, 0>});
}

}  // namespace onnxtrain
