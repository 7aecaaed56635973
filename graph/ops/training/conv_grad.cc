// ConvGrad (ai.onnxtrain, opset 1): the gradients of a Conv node. Inputs dY (N,M,O1..On), X (N,C,D1..Dn) and
// W (M,C/group,k1..kn); the forward node's attributes (strides, pads, dilations, group, kernel_shape; the
// Conv rule resolves auto_pad to explicit pads where the sizes are static). Three optional outputs: dX
// shaped like X, dW like W, dB (M). Cost: 2·MACs of the forward conv for each of dX and dW, plus dY's
// element count for dB.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

void infer_conv_grad(InferContext& ctx) {
  require_floating(ctx, 0);
  require_same_dtype(ctx, 1, 0);
  require_same_dtype(ctx, 2, 0);
  const Shape& dy = ctx.input_shape(0);
  const Shape& x = ctx.input_shape(1);
  const Shape& w = ctx.input_shape(2);
  require_spatial_input(ctx, x);
  if (dy.rank_known && x.rank_known && dy.rank() != x.rank()) {
    fail_op(ctx, "dY has shape " + dy.to_string() + " but X has shape " + x.to_string() + "; they need the same rank");
  }
  if (w.rank_known && x.rank_known && w.rank() != x.rank()) {
    fail_op(ctx, "W has shape " + w.to_string() + " but X has shape " + x.to_string() + "; they need the same rank");
  }
  const Dim out_channels = w.rank_known ? w.dims[0] : Dim::unknown();
  if (dy.rank_known && out_channels.is_static() && dy.dims[1].is_static() &&
      dy.dims[1].value() != out_channels.value()) {
    fail_op(ctx, "dY has shape " + dy.to_string() + " but W " + w.to_string() + " has " + out_channels.to_string() +
                     " output channels");
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
  ctx.set_output(1, ctx.input_dtype(0), w);
  const Dim bias = out_channels.is_static() || !dy.rank_known ? out_channels : dy.dims[1];
  ctx.set_output(2, ctx.input_dtype(0), Shape(std::vector<Dim>{bias}));
}

OpCost conv_grad_cost(const CostContext& ctx) {
  const Shape& w = ctx.inputs[2];
  if (!w.rank_known || w.rank() == 0 || !w.dims[0].is_static() || w.dims[0].value() == 0) return {};
  return conv_grad_cost_of(ctx, static_cast<double>(ctx.input_numel(0)) * static_cast<double>(ctx.input_numel(2)) /
                                    static_cast<double>(w.dims[0].value()));
}

}  // namespace

OpCost conv_grad_cost_of(const CostContext& ctx, double macs) {
  double flops = 0;
  if (ctx.outputs.size() > 0 && ctx.outputs[0].rank_known) flops += 2 * macs;
  if (ctx.outputs.size() > 1 && ctx.outputs[1].rank_known) flops += 2 * macs;
  if (ctx.outputs.size() > 2 && ctx.outputs[2].rank_known) flops += static_cast<double>(ctx.input_numel(0));
  return {flops, 0};
}

void register_conv_grad_op(OpRegistry& registry) {
  registry.add({.op_type = "ConvGrad",
                .domain = kTrainingDomain,
                .min_inputs = 3,
                .max_inputs = 3,
                .min_outputs = 1,
                .max_outputs = 3,
                .input_kinds = {InputKind::Data, InputKind::Data, InputKind::Data},
                .infer = &infer_conv_grad,
                .cost = &conv_grad_cost});
}

}  // namespace onnxtrain
