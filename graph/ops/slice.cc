// Slice (opset 1: starts/ends/axes attributes; 10: inputs plus steps; 11: negative axes; 13). Starts
// and ends clamp like numpy slicing; a full-range slice keeps a symbolic dim; known vectors slice too.
#include <algorithm>
#include <climits>

#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;
using namespace shape_ops;

constexpr int kSliceInputsSince = 10;

// Whether start:end:1 surely covers a whole dim of unknown size (exporters write INT64_MAX or INT32_MAX).
bool covers_whole_dim(int64_t start, int64_t end, int64_t step) { return step == 1 && start == 0 && end >= INT32_MAX; }

struct SliceArgs {
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;  // nullopt: not constant
  bool axes_given = false, steps_given = false;
};

SliceArgs read_slice_args(const InferContext& ctx) {
  const Node& node = ctx.node();
  SliceArgs args;
  if (ctx.opset() < kSliceInputsSince) {
    if (!node.has_attribute("starts") || !node.has_attribute("ends"))
      fail_op(ctx, "the starts and ends attributes are required");
    args.starts = node.attr_ints("starts");
    args.ends = node.attr_ints("ends");
    args.axes_given = node.has_attribute("axes");
    if (args.axes_given) args.axes = node.attr_ints("axes");
    return args;
  }
  if (!ctx.has_input(1) || !ctx.has_input(2)) fail_op(ctx, "the starts and ends inputs are required");
  args.starts = ctx.input_ints(1);
  args.ends = ctx.input_ints(2);
  args.axes_given = ctx.has_input(3);
  if (args.axes_given) args.axes = ctx.input_ints(3);
  args.steps_given = ctx.has_input(4);
  if (args.steps_given) args.steps = ctx.input_ints(4);
  return args;
}

// x[..., 0:n] with n a symbol (a sequence length from Shape(input_ids)): exporters slice a buffer of the
// maximum length (BERT's position_ids (1, 512)) down to the input's length. The result has n elements,
// assuming n does not exceed the dim; the kernel checks that at run time (the allocated output's sizes
// must be what the inputs give). nullopt unless the starts are 0, the steps 1 and some end is a symbol.
std::optional<Shape> symbolic_prefix_slice(const InferContext& ctx, const SliceArgs& args, const Shape& in) {
  if (ctx.opset() < kSliceInputsSince || args.ends || !args.starts || (args.axes_given && !args.axes))
    return std::nullopt;
  if (args.steps_given &&
      (!args.steps || std::any_of(args.steps->begin(), args.steps->end(), [](int64_t v) { return v != 1; })))
    return std::nullopt;
  const std::optional<std::vector<Dim>> ends = ctx.input_known(2);
  if (!ends || ends->size() != args.starts->size()) return std::nullopt;
  Shape out = in;
  bool symbolic = false;
  for (size_t j = 0; j < ends->size(); ++j) {
    const int64_t axis = args.axes ? (*args.axes)[j] : static_cast<int64_t>(j);
    const std::optional<int64_t> k = normalize_axis(axis, in.rank());
    if (!k || (*args.starts)[j] != 0) return std::nullopt;
    const Dim& end = (*ends)[j];
    Dim& d = out.dims[*k];
    if (end.is_symbolic()) {
      d = end, symbolic = true;
    } else if (end.is_static() && d.is_static()) {
      d = numpy_slice(0, end.value(), 1, d.value()).count;
    } else if (!(end.is_static() && covers_whole_dim(0, end.value(), 1))) {
      d = Dim::unknown();
    }
  }
  return symbolic ? std::optional<Shape>(out) : std::nullopt;
}

void infer_slice(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  DType dtype = ctx.input_dtype(0);
  SliceArgs args = read_slice_args(ctx);
  if (!in.rank_known) {
    ctx.set_output(0, dtype, Shape::unknown_rank());
    return;
  }
  const int64_t rank = in.rank();
  if (std::optional<Shape> prefix = symbolic_prefix_slice(ctx, args, in)) {
    ctx.set_output(0, dtype, *prefix);
    return;
  }
  if ((args.axes_given && !args.axes) || !args.starts || !args.ends || (args.steps_given && !args.steps)) {
    Shape out = in;  // the sliced axes lose their size; all of them when the axes are unknown
    for (int64_t k = 0; k < rank; ++k)
      if (!args.axes || std::count(args.axes->begin(), args.axes->end(), k) ||
          std::count(args.axes->begin(), args.axes->end(), k - rank))
        out.dims[k] = Dim::unknown();
    ctx.set_output(0, dtype, out);
    return;
  }
  const auto& starts = *args.starts;
  const auto& ends = *args.ends;
  const size_t n = starts.size();
  std::vector<int64_t> axes = args.axes.value_or(std::vector<int64_t>{});
  if (!args.axes_given)
    for (size_t j = 0; j < n; ++j) axes.push_back(static_cast<int64_t>(j));
  std::vector<int64_t> steps = args.steps.value_or(std::vector<int64_t>(n, 1));
  if (ends.size() != n || axes.size() != n || steps.size() != n) {
    fail_op(ctx, "starts " + ints_to_string(starts) + ", ends " + ints_to_string(ends) + ", axes " +
                     ints_to_string(axes) + " and steps " + ints_to_string(steps) + " must have the same length");
  }
  std::vector<int64_t> normalized = checked_axes(ctx, axes, rank);
  Shape out = in;
  for (size_t j = 0; j < n; ++j) {
    if (steps[j] == 0) fail_op(ctx, "step 0 on axis " + std::to_string(axes[j]) + " (steps must be non-zero)");
    Dim& d = out.dims[normalized[j]];
    if (d.is_static())
      d = numpy_slice(starts[j], ends[j], steps[j], d.value()).count;
    else if (!covers_whole_dim(starts[j], ends[j], steps[j]))
      d = Dim::unknown();
  }
  ctx.set_output(0, dtype, out);

  auto known = ctx.input_known(0);
  if (!known || rank != 1 || n != 1) return;
  SliceExtent r = numpy_slice(starts[0], ends[0], steps[0], static_cast<int64_t>(known->size()));
  std::vector<Dim> picked;
  for (int64_t i = 0; i < r.count; ++i) picked.push_back((*known)[r.first + i * steps[0]]);
  set_known_output(ctx, 0, dtype, picked);
}

std::vector<Tensor> fold_slice(const FoldContext& ctx) {
  const Tensor& data = ctx.inputs[0];
  const Node& node = ctx.node;
  const bool attrs = node.opset < kSliceInputsSince;
  std::vector<int64_t> starts = attrs ? node.attr_ints("starts") : ctx.input_ints(1);
  std::vector<int64_t> ends = attrs ? node.attr_ints("ends") : ctx.input_ints(2);
  std::vector<int64_t> axes, steps(starts.size(), 1);
  if (attrs ? node.has_attribute("axes") : ctx.has_input(3))
    axes = attrs ? node.attr_ints("axes") : ctx.input_ints(3);
  else
    for (size_t j = 0; j < starts.size(); ++j) axes.push_back(static_cast<int64_t>(j));
  if (!attrs && ctx.has_input(4)) steps = ctx.input_ints(4);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    fail_fold(ctx, "starts, ends, axes and steps must have the same length");
  }
  const std::vector<int64_t> in_strides = row_major_strides(data.sizes());
  std::vector<int64_t> sizes = data.sizes(), strides = in_strides;
  int64_t base = 0;
  for (size_t j = 0; j < starts.size(); ++j) {
    auto axis = normalize_axis(axes[j], data.rank());
    if (!axis || steps[j] == 0) fail_fold(ctx, "invalid axis or step");
    SliceExtent r = numpy_slice(starts[j], ends[j], steps[j], data.sizes()[*axis]);
    sizes[*axis] = r.count;
    base += r.first * in_strides[*axis];
    strides[*axis] = in_strides[*axis] * steps[j];
  }
  return {strided_copy(data, sizes, base, strides)};
}

}  // namespace

void register_slice_ops(OpRegistry& registry) {
  registry.add({.op_type = "Slice",
                .max_inputs = 5,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_slice,
                .cost = no_flops,
                .fold = fold_slice});
}

}  // namespace onnxtrain
