// TapMajorConv and TapMajorConvGrad (ai.onnxtrain, opset 1): Conv and ConvGrad with the weight in tap-major
// layout, Wt (k1..kn, C, M) = Transpose(W, perm (2..n+1, 1, 0)) of Conv's W (M, C, k1..kn), one group.
// Training holds the weight of a convolution with a small output plane this way
// (graph/autodiff/tap_major_conv_weights.h), because its CPU kernel multiplies one (C, M) matrix per tap
// (kernels/onednn/tap_product_conv.h) and would otherwise transpose W and dW at every step.
//   TapMajorConv(X, Wt[, B]) -> Y                     as Conv(X, W[, B]), the same attributes
//   TapMajorConvGrad(dY, X, Wt) -> dX, dWt, dB        as ConvGrad(dY, X, W), dWt in Wt's layout
// Costs: those of Conv and ConvGrad.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

// Conv's W (M, C, k1..kn) for a tap-major Wt (k1..kn, C, M).
Shape model_layout(const Shape& wt) {
  if (!wt.rank_known || wt.rank() < 3) return wt;
  const size_t rank = static_cast<size_t>(wt.rank());
  Shape w({wt.dims[rank - 1], wt.dims[rank - 2]});
  for (size_t d = 0; d + 2 < rank; ++d) w.dims.push_back(wt.dims[d]);
  return w;
}

void require_one_group(const InferContext& ctx) {
  if (ctx.node().attr_int("group", 1) != 1) fail_op(ctx, "a tap-major weight is built for one group");
}

void infer_tap_major_conv(InferContext& ctx) {
  require_one_group(ctx);
  infer_conv_with_weight(ctx, model_layout(ctx.input_shape(1)));
}

void infer_tap_major_conv_grad(InferContext& ctx) {
  require_one_group(ctx);
  require_floating(ctx, 0);
  require_same_dtype(ctx, 1, 0);
  require_same_dtype(ctx, 2, 0);
  const Shape& wt = ctx.input_shape(2);
  const Dim out_channels = wt.rank_known && wt.rank() > 0 ? wt.dims.back() : Dim::unknown();
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(1));
  ctx.set_output(1, ctx.input_dtype(0), wt);
  ctx.set_output(2, ctx.input_dtype(0), Shape(std::vector<Dim>{out_channels}));
}

// The multiply-adds of the forward convolution: each of `elements` output elements takes C·k1·..·kn.
double macs(const CostContext& ctx, size_t wt_input, int64_t elements) {
  const Shape& wt = ctx.inputs[wt_input];
  if (!wt.rank_known || wt.rank() == 0 || !wt.dims.back().is_static() || wt.dims.back().value() == 0) return 0;
  return static_cast<double>(elements) * static_cast<double>(ctx.input_numel(wt_input)) /
         static_cast<double>(wt.dims.back().value());
}

OpCost tap_major_conv_cost(const CostContext& ctx) {
  const double m = macs(ctx, 1, ctx.output_numel(0));
  const double bias = ctx.inputs.size() > 2 && ctx.inputs[2].rank_known ? static_cast<double>(ctx.output_numel(0)) : 0;
  return {2 * m + bias, 4 * m + bias};
}

OpCost tap_major_conv_grad_cost(const CostContext& ctx) {
  return conv_grad_cost_of(ctx, macs(ctx, 2, ctx.input_numel(0)));
}

}  // namespace

void register_tap_major_conv_ops(OpRegistry& registry) {
  registry.add({.op_type = "TapMajorConv",
                .domain = kTrainingDomain,
                .min_inputs = 2,
                .max_inputs = 3,
                .input_kinds = {InputKind::Data, InputKind::Weight, InputKind::Weight},
                .infer = &infer_tap_major_conv,
                .cost = &tap_major_conv_cost});
  registry.add({.op_type = "TapMajorConvGrad",
                .domain = kTrainingDomain,
                .min_inputs = 3,
                .max_inputs = 3,
                .min_outputs = 1,
                .max_outputs = 3,
                .input_kinds = {InputKind::Data, InputKind::Data, InputKind::Data},
                .infer = &infer_tap_major_conv_grad,
                .cost = &tap_major_conv_grad_cost});
}

}  // namespace onnxtrain
