// Resize (opset 10: X, scales; 11-19: X, roi, scales, sizes; 18: axes, keep_aspect_ratio_policy, antialias)
// and its predecessor Upsample (7: a scales attribute; 9: a scales input). Modes nearest, linear and cubic
// with every coordinate transformation mode; the sampling itself is graph/resize_sampling.h's.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/resize_sampling.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;

// The float values of input `slot` (roi, scales) when constant; nullopt when absent, empty or not constant.
std::optional<std::vector<double>> constant_floats(const InferContext& ctx, int slot, const char* what) {
  if (slot < 0 || !ctx.has_input(slot)) return std::nullopt;
  const Tensor* t = ctx.input_constant(slot);
  if (!t) return std::nullopt;
  std::vector<double> values;
  if (!read_resize_floats(t->dtype(), t->raw(), t->numel(), values))
    fail_op(ctx,
            std::string(what) + " has dtype " + std::string(dtype_name(t->dtype())) + ", expected float32 or float64");
  return values;
}

void infer_resize(InferContext& ctx) {
  const Node& node = ctx.node();
  const ResizeSampling sampling = decode_resize_sampling(node.attributes, resize_is_legacy(node.op_type, ctx.opset()));
  if (!sampling.error.empty()) fail_op(ctx, sampling.error);
  const DType dtype = ctx.input_dtype(0);
  const Shape& in = ctx.input_shape(0);
  if (!in.rank_known) return ctx.set_output(0, dtype, Shape::unknown_rank());
  const int64_t rank = in.rank();
  if (rank == 0) fail_op(ctx, "cannot resize a scalar");

  const ResizeSlots slots = resize_slots(node.op_type, ctx.opset());
  std::optional<std::vector<double>> scales = constant_floats(ctx, slots.scales, "scales");
  if (slots.scales < 0) scales = node.attr_floats("scales");  // Upsample-7
  std::optional<std::vector<Dim>> sizes;
  if (slots.sizes >= 0) sizes = ctx.input_known(slots.sizes);
  const bool sizes_given = slots.sizes >= 0 && ctx.has_input(slots.sizes);
  if (sizes_given && !sizes) return ctx.set_output(0, dtype, Shape(std::vector<Dim>(rank)));  // known at run time
  if (scales && scales->empty() && !(sizes && !sizes->empty())) scales.reset();
  if (!scales && !(sizes && !sizes->empty())) {
    if (slots.scales >= 0 && ctx.has_input(slots.scales) && !ctx.input_constant(slots.scales))
      return ctx.set_output(0, dtype, Shape(std::vector<Dim>(rank)));  // scales computed in the graph
    fail_op(ctx, "one of scales and sizes must be given");
  }
  const std::optional<std::vector<double>> roi = constant_floats(ctx, slots.roi, "roi");
  const bool crop = sampling.coordinates == ResizeCoordinates::TfCropAndResize;
  if (crop && !roi) return ctx.set_output(0, dtype, Shape(std::vector<Dim>(rank)));

  // Resolve on the static lengths (1 stands in for a symbolic one), then keep symbols where they pass.
  std::vector<int64_t> static_in(rank, 1), static_sizes;
  for (int64_t k = 0; k < rank; ++k)
    if (in.dims[k].is_static()) static_in[k] = in.dims[k].value();
  if (sizes && !sizes->empty())
    for (const Dim& d : *sizes) static_sizes.push_back(d.is_static() ? d.value() : 1);
  std::string error;
  const std::vector<ResizeAxis> axes = resolve_resize_axes(sampling, static_in, crop ? &*roi : nullptr,
                                                           scales ? &*scales : nullptr, &static_sizes, &error);
  if (axes.empty()) fail_op(ctx, error + " (input shape " + in.to_string() + ")");
  std::vector<int64_t> listed = sampling.axes;  // which entry of sizes belongs to which axis
  if (listed.empty())
    for (int64_t k = 0; k < rank; ++k) listed.push_back(k);
  const bool by_sizes = !static_sizes.empty();
  bool aspect_static = true;  // keep_aspect_ratio_policy's one scale needs every listed length and size
  for (size_t j = 0; j < listed.size(); ++j) {
    const int64_t k = listed[j] < 0 ? listed[j] + rank : listed[j];
    aspect_static = aspect_static && in.dims[k].is_static() && (!by_sizes || (*sizes)[j].is_static());
  }
  Shape out = in;
  for (size_t j = 0; j < listed.size(); ++j) {
    const int64_t k = listed[j] < 0 ? listed[j] + rank : listed[j];
    if (by_sizes && sampling.aspect == ResizeAspect::Stretch)
      out.dims[k] = (*sizes)[j];
    else if (by_sizes)
      out.dims[k] = aspect_static ? Dim(axes[k].out) : Dim::unknown();
    else if (in.dims[k].is_static())
      out.dims[k] = axes[k].out;
    else  // a symbolic length (the batch) passes where the axis keeps its length: scale 1, all of it cropped
      out.dims[k] = axes[k].scale == 1.0 && (!crop || (axes[k].roi_start == 0.0 && axes[k].roi_end == 1.0))
                        ? in.dims[k]
                        : Dim::unknown();
  }
  ctx.set_output(0, dtype, out);
}

// Each output element sums its taps' products: 1 (nearest), 2 (linear) or 4 (cubic) per resized axis, a
// multiply and an add each; the gradient gathers as many.
OpCost resize_cost(const CostContext& ctx) {
  const Shape& in = ctx.inputs.at(0);
  const Shape& out = ctx.outputs.at(0);
  const std::string mode = ctx.node.attr_string("mode", "nearest");
  const double per_axis = mode == "cubic" ? 4 : mode == "nearest" ? 1 : 2;
  double taps = 1;
  for (int64_t k = 0; in.rank_known && out.rank_known && k < in.rank() && k < out.rank(); ++k)
    if (in.dims[k] != out.dims[k]) taps *= per_axis;
  const double flops = 2.0 * taps * static_cast<double>(ctx.output_numel(0));
  return {.forward_flops = flops, .backward_flops = flops};
}

}  // namespace

void register_resize_ops(OpRegistry& registry) {
  registry.add({.op_type = "Resize",
                .max_inputs = 4,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_resize,
                .cost = resize_cost});
  registry.add({.op_type = "Upsample",
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_resize,
                .cost = resize_cost});
}

}  // namespace onnxtrain
