// Conv and ConvTranspose, 1-D to 3-D: X (N,C,D1..Dn); Conv W (M,C/group,k1..kn), ConvTranspose W
// (C,M/group,k1..kn); optional bias B (M). The batch dim stays symbolic, spatial dims are computed.
// Cost: 2·MACs forward (+1 per output element with a bias); backward twice the MACs' FLOPs (data and
// weight gradients) plus the bias gradient.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

struct ConvInputs {
  const Shape& x;
  const Shape& w;
  size_t spatial;
  int64_t group;
};

// Checks the types and ranks shared by Conv and ConvTranspose, for the weight shape `w` (input 1's, or
// TapMajorConv's in the model's layout); nullopt when X's rank is unknown.
std::optional<ConvInputs> read_conv_inputs(InferContext& ctx, const Shape& w) {
  require_floating(ctx, 0);
  require_same_dtype(ctx, 1, 0);
  if (ctx.has_input(2)) require_same_dtype(ctx, 2, 0);
  const Shape& x = ctx.input_shape(0);
  const int64_t group = ctx.node().attr_int("group", 1);
  if (group < 1) fail_op(ctx, "group must be >= 1, got " + std::to_string(group));
  if (!x.rank_known) return std::nullopt;
  require_spatial_input(ctx, x);
  if (w.rank_known && w.rank() != x.rank()) {
    fail_op(ctx, "weight has shape " + w.to_string() + " but the input has shape " + x.to_string() +
                     "; the weight needs as many dims as the input");
  }
  return ConvInputs{x, w, static_cast<size_t>(x.rank() - 2), group};
}

// The kernel's spatial sizes: the kernel_shape attribute (checked against W) or W's own dims.
std::vector<Dim> read_kernel(const InferContext& ctx, const ConvInputs& in) {
  std::vector<Dim> kernel(in.spatial);
  for (size_t i = 0; i < in.spatial; ++i) kernel[i] = in.w.rank_known ? in.w.dims[i + 2] : Dim::unknown();
  if (!ctx.node().has_attribute("kernel_shape")) return kernel;
  const std::vector<int64_t> attr = ctx.node().attr_ints("kernel_shape");
  if (attr.size() != in.spatial) {
    fail_op(ctx, "kernel_shape has " + std::to_string(attr.size()) + " values but the input has " +
                     std::to_string(in.spatial) + " spatial dims");
  }
  for (size_t i = 0; i < in.spatial; ++i) {
    if (kernel[i].is_static() && kernel[i].value() != attr[i]) {
      fail_op(ctx,
              "kernel_shape " + Shape::of(attr).to_string() + " does not match the weight's shape " + in.w.to_string());
    }
    kernel[i] = attr[i];
  }
  return kernel;
}

void check_bias(const InferContext& ctx, const Dim& out_channels, const Shape& w) {
  if (ctx.has_input(2)) {
    require_vector_of(ctx, 2, "bias", out_channels, "one value per output channel of the weight " + w.to_string());
  }
}

}  // namespace

void infer_conv_with_weight(InferContext& ctx, const Shape& weight) {
  auto in = read_conv_inputs(ctx, weight);
  if (!in) return ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
  const Shape& x = in->x;
  const Shape& w = in->w;
  const Dim channels = x.dims[1];
  const Dim per_group = w.rank_known ? w.dims[1] : Dim::unknown();
  const Dim out_channels = w.rank_known ? w.dims[0] : Dim::unknown();
  if (channels.is_static() && per_group.is_static() && channels.value() != per_group.value() * in->group) {
    std::string grouping = in->group == 1 ? ""
                                          : " (group=" + std::to_string(in->group) + ", so " +
                                                std::to_string(per_group.value() * in->group) + " in all)";
    fail_op(ctx, "weight has " + per_group.to_string() + " input channels per group" + grouping + " but input has " +
                     channels.to_string() + " channels (shape " + x.to_string() + ")");
  }
  if (out_channels.is_static() && out_channels.value() % in->group != 0) {
    fail_op(ctx, "weight has " + out_channels.to_string() +
                     " output channels, which group=" + std::to_string(in->group) + " does not divide");
  }
  check_bias(ctx, out_channels, w);
  WindowSpec window = read_window(ctx, in->spatial, read_kernel(ctx, *in));
  window.ceil_mode = false;
  Shape out({x.dims[0], out_channels});
  for (size_t i = 0; i < in->spatial; ++i) out.dims.push_back(window_output_dim(ctx, x.dims[i + 2], i, window));
  ctx.set_output(0, ctx.input_dtype(0), out);
}

namespace {

void infer_conv(InferContext& ctx) { infer_conv_with_weight(ctx, ctx.input_shape(1)); }

// One spatial dim of ConvTranspose: stride·(in−1) + output_padding + dilated kernel − pads.
Dim transposed_dim(const InferContext& ctx, const Dim& in, size_t axis, const WindowSpec& w, int64_t output_padding) {
  const int64_t stride = w.strides[axis];
  if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") return in * Dim(stride);
  const Dim& k = w.kernel[axis];
  if (!k.is_static()) return Dim::unknown();
  const int64_t effective = (k.value() - 1) * w.dilations[axis] + 1;
  const int64_t pads = w.auto_pad == "VALID" ? 0 : w.pads[axis] + w.pads[axis + w.kernel.size()];
  const int64_t offset = output_padding + effective - pads - stride;  // out = stride·in + offset
  if (!in.is_static()) return offset == 0 ? in * Dim(stride) : Dim::unknown();
  const int64_t out = stride * in.value() + offset;
  if (out < 1) {
    fail_op(ctx, "the output size on spatial axis " + std::to_string(axis) + " would be " + std::to_string(out) +
                     "; pads are larger than the transposed window");
  }
  return out;
}

void infer_conv_transpose(InferContext& ctx) {
  auto in = read_conv_inputs(ctx, ctx.input_shape(1));
  if (!in) return ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
  const Shape& x = in->x;
  const Shape& w = in->w;
  const Dim channels = x.dims[1];
  const Dim weight_in = w.rank_known ? w.dims[0] : Dim::unknown();
  if (channels.is_static() && weight_in.is_static() && channels.value() != weight_in.value()) {
    fail_op(ctx, "weight has " + weight_in.to_string() + " input channels but input has " + channels.to_string() +
                     " channels (shape " + x.to_string() + "); a ConvTranspose weight is (C, M/group, k1, ...)");
  }
  const Dim out_channels = w.rank_known ? w.dims[1] * Dim(in->group) : Dim::unknown();
  check_bias(ctx, out_channels, w);
  const WindowSpec window = read_window(ctx, in->spatial, read_kernel(ctx, *in));
  const Node& node = ctx.node();
  const std::vector<int64_t> output_padding = node.attr_ints("output_padding", std::vector<int64_t>(in->spatial, 0));
  if (output_padding.size() != in->spatial) {
    fail_op(ctx, "output_padding has " + std::to_string(output_padding.size()) + " values but the input has " +
                     std::to_string(in->spatial) + " spatial dims");
  }
  Shape out({x.dims[0], out_channels});
  if (node.has_attribute("output_shape")) {
    // The spatial sizes, or (as ONNX Runtime also accepts) the whole shape: take the trailing ones.
    const std::vector<int64_t> given = node.attr_ints("output_shape");
    if (given.size() != in->spatial && given.size() != in->spatial + 2) {
      fail_op(ctx, "output_shape has " + std::to_string(given.size()) + " values but the input has " +
                       std::to_string(in->spatial) + " spatial dims");
    }
    for (size_t i = given.size() - in->spatial; i < given.size(); ++i) out.dims.emplace_back(given[i]);
  } else {
    for (size_t i = 0; i < in->spatial; ++i) {
      out.dims.push_back(transposed_dim(ctx, x.dims[i + 2], i, window, output_padding[i]));
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
}

// Each of `elements` (Conv: output, ConvTranspose: input elements) takes W numel / W's first dim MACs.
OpCost conv_like_cost(const CostContext& ctx, int64_t elements) {
  const Shape& w = ctx.inputs[1];
  if (!w.rank_known || w.rank() == 0 || !w.dims[0].is_static() || w.dims[0].value() == 0) return {};
  const double macs =
      static_cast<double>(elements) * static_cast<double>(ctx.input_numel(1)) / static_cast<double>(w.dims[0].value());
  const double bias = ctx.inputs.size() > 2 && ctx.inputs[2].rank_known ? static_cast<double>(ctx.output_numel(0)) : 0;
  return {2 * macs + bias, 4 * macs + bias};
}

OpCost conv_cost(const CostContext& ctx) { return conv_like_cost(ctx, ctx.output_numel(0)); }
OpCost conv_transpose_cost(const CostContext& ctx) { return conv_like_cost(ctx, ctx.input_numel(0)); }

OpSchema conv_schema(const char* name, void (*infer)(InferContext&), OpCost (*cost)(const CostContext&)) {
  return {.op_type = name,
          .min_inputs = 2,
          .max_inputs = 3,
          .input_kinds = {InputKind::Data, InputKind::Weight, InputKind::Weight},
          .infer = infer,
          .cost = cost};
}

}  // namespace

void register_conv_ops(OpRegistry& registry) {
  registry.add(conv_schema("Conv", &infer_conv, &conv_cost));
  registry.add(conv_schema("ConvTranspose", &infer_conv_transpose, &conv_transpose_cost));
}

}  // namespace onnxtrain
