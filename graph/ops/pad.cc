// Pad (opset 1: `paddings` attribute; 2: `pads`/`value` attributes; 11: pads and constant_value inputs;
// 18: axes input; 19: wrap mode). Pads are [begins..., ends...]; negative pads crop.
#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;
using namespace shape_ops;

constexpr int kPadInputsSince = 11;
constexpr int kAxesSince = 18;

bool known_mode(const std::string& mode) {
  return mode == "constant" || mode == "reflect" || mode == "edge" || mode == "wrap";
}

const char* pads_attribute(const Node& node) {
  return node.opset <= 1 && node.has_attribute("paddings") ? "paddings" : "pads";
}

// Per-dim (begin, end) pads over a rank; nullopt when `pads` does not give two per axis.
std::optional<std::vector<std::pair<int64_t, int64_t>>> pads_per_dim(const std::vector<int64_t>& pads,
                                                                     const std::vector<int64_t>& axes, int64_t rank) {
  if (pads.size() != 2 * axes.size()) return std::nullopt;
  std::vector<std::pair<int64_t, int64_t>> per_dim(rank, {0, 0});
  for (size_t j = 0; j < axes.size(); ++j) per_dim[axes[j]] = {pads[j], pads[j + axes.size()]};
  return per_dim;
}

std::vector<int64_t> all_axes(int64_t rank) {
  std::vector<int64_t> axes(rank);
  for (int64_t k = 0; k < rank; ++k) axes[k] = k;
  return axes;
}

void infer_pad(InferContext& ctx) {
  const Node& node = ctx.node();
  const Shape& in = ctx.input_shape(0);
  DType dtype = ctx.input_dtype(0);
  std::string mode = node.attr_string("mode", "constant");
  if (!known_mode(mode)) fail_op(ctx, "unknown mode '" + mode + "' (expected constant, reflect, edge or wrap)");
  std::optional<std::vector<int64_t>> pads, axes;
  bool axes_given = false;
  if (ctx.opset() < kPadInputsSince) {
    if (!node.has_attribute(pads_attribute(node)))
      fail_op(ctx, std::string("the ") + pads_attribute(node) + " attribute is required");
    pads = node.attr_ints(pads_attribute(node));
  } else {
    if (!ctx.has_input(1)) fail_op(ctx, "the pads input is required");
    pads = ctx.input_ints(1);
    if (ctx.has_input(2) && ctx.input_dtype(2) != dtype) {
      fail_op(ctx, "constant_value has dtype " + std::string(dtype_name(ctx.input_dtype(2))) + ", expected " +
                       std::string(dtype_name(dtype)) + " like the data");
    }
    axes_given = ctx.opset() >= kAxesSince && ctx.has_input(3);
    if (axes_given) axes = ctx.input_ints(3);
  }
  if (!in.rank_known) {
    bool rank_follows = pads && !axes_given && pads->size() % 2 == 0;
    ctx.set_output(0, dtype, rank_follows ? Shape(std::vector<Dim>(pads->size() / 2)) : Shape::unknown_rank());
    return;
  }
  if (!pads || (axes_given && !axes)) {
    ctx.set_output(0, dtype, Shape(std::vector<Dim>(in.rank())));
    return;
  }
  std::vector<int64_t> normalized = axes_given ? checked_axes(ctx, *axes, in.rank()) : all_axes(in.rank());
  auto per_dim = pads_per_dim(*pads, normalized, in.rank());
  if (!per_dim) {
    fail_op(ctx, "pads " + ints_to_string(*pads) + " has " + std::to_string(pads->size()) + " entries, expected " +
                     std::to_string(2 * normalized.size()) + " (a begin and an end for each of " +
                     std::to_string(normalized.size()) + " axes; input shape " + in.to_string() + ")");
  }
  Shape out = in;
  for (int64_t k = 0; k < in.rank(); ++k) {
    auto [begin, end] = (*per_dim)[k];
    out.dims[k] = in.dims[k] + Dim(begin + end);
    if (out.dims[k].is_static() && out.dims[k].value() < 0) {
      fail_op(ctx, "pads " + ints_to_string(*pads) + " crop axis " + std::to_string(k) + " of input shape " +
                       in.to_string() + " below zero");
    }
  }
  ctx.set_output(0, dtype, out);
}

// The source index along one axis of size `size` for an output position shifted by the begin pad;
// -1 means "the constant".
int64_t source_index(int64_t i, int64_t size, const std::string& mode) {
  if (i >= 0 && i < size) return i;
  if (mode == "constant" || size == 0) return -1;
  if (mode == "edge") return i < 0 ? 0 : size - 1;
  if (mode == "wrap") return ((i % size) + size) % size;
  if (size == 1) return 0;  // reflect
  const int64_t period = 2 * (size - 1);
  i = ((i % period) + period) % period;
  return i < size ? i : period - i;
}

std::vector<Tensor> fold_pad(const FoldContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& data = ctx.inputs[0];
  const std::string mode = node.attr_string("mode", "constant");
  const bool inputs = node.opset >= kPadInputsSince;
  std::vector<int64_t> pads = inputs ? ctx.input_ints(1) : node.attr_ints(pads_attribute(node));
  std::vector<int64_t> axes = all_axes(data.rank());
  if (inputs && node.opset >= kAxesSince && ctx.has_input(3)) {
    axes = ctx.input_ints(3);
    for (int64_t& a : axes) {
      auto n = normalize_axis(a, data.rank());
      if (!n) fail_fold(ctx, "axis " + std::to_string(a) + " is out of range");
      a = *n;
    }
  }
  auto per_dim = pads_per_dim(pads, axes, data.rank());
  if (!per_dim) fail_fold(ctx, "pads must give a begin and an end for each axis");

  Tensor constant(data.dtype(), {1});
  if (inputs && ctx.has_input(2) && ctx.inputs[2].numel() > 0) copy_element(ctx.inputs[2], 0, constant, 0);
  if (!inputs) write_from_double(constant, 0, node.attr_float("value", 0.0));

  std::vector<int64_t> sizes = data.sizes();
  for (size_t k = 0; k < sizes.size(); ++k) {
    sizes[k] += (*per_dim)[k].first + (*per_dim)[k].second;
    if (sizes[k] < 0) fail_fold(ctx, "pads crop an axis below zero");
  }
  const std::vector<int64_t> in_strides = row_major_strides(data.sizes());
  Tensor out(data.dtype(), sizes);
  int64_t linear = 0;
  for_each_index(sizes, [&](const std::vector<int64_t>& index) {
    int64_t source = 0;
    for (size_t k = 0; k < index.size() && source >= 0; ++k) {
      int64_t i = source_index(index[k] - (*per_dim)[k].first, data.sizes()[k], mode);
      source = i < 0 ? -1 : source + i * in_strides[k];
    }
    if (source < 0)
      copy_element(constant, 0, out, linear++);
    else
      copy_element(data, source, out, linear++);
  });
  return {out};
}

}  // namespace

void register_pad_ops(OpRegistry& registry) {
  registry.add({.op_type = "Pad",
                .max_inputs = 4,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_pad,
                .cost = no_flops,
                .fold = fold_pad});
}

}  // namespace onnxtrain
