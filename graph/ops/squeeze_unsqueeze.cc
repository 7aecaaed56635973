// Squeeze and Unsqueeze (opset 1, 11: negative axes, 13: axes become an input). Both only relabel
// dims, so known values pass through (a 0-D known scalar becomes a 1-D vector and back).
#include <algorithm>

#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;
using namespace shape_ops;

constexpr int kAxesInputSince = 13;

void pass_known_through(InferContext& ctx, int64_t out_rank) {
  auto known = ctx.input_known(0);
  if (known && out_rank <= 1) set_known_output(ctx, 0, ctx.input_dtype(0), *known);
}

// Marks the positions of the new axes in a shape of rank in_rank + axes.size(); nullopt when invalid.
std::optional<std::vector<bool>> unsqueezed_positions(const std::vector<int64_t>& axes, int64_t out_rank) {
  std::vector<bool> is_new(out_rank, false);
  for (int64_t axis : axes) {
    auto a = normalize_axis(axis, out_rank);
    if (!a || is_new[*a]) return std::nullopt;
    is_new[*a] = true;
  }
  return is_new;
}

void infer_unsqueeze(InferContext& ctx) {
  IntList axes = read_int_list(ctx, "axes", 1, kAxesInputSince);
  if (!axes.given)
    fail_op(ctx, ctx.opset() >= kAxesInputSince ? "the axes input is required" : "the axes attribute is required");
  const Shape& in = ctx.input_shape(0);
  DType dtype = ctx.input_dtype(0);
  if (!in.rank_known || !axes.values) {
    ctx.set_output(
        0, dtype,
        in.rank_known && axes.count ? Shape(std::vector<Dim>(in.rank() + *axes.count)) : Shape::unknown_rank());
    return;
  }
  int64_t out_rank = in.rank() + static_cast<int64_t>(axes.values->size());
  std::vector<int64_t> normalized = checked_axes(ctx, *axes.values, out_rank);
  std::vector<Dim> out;
  auto next = in.dims.begin();
  for (int64_t k = 0; k < out_rank; ++k) {
    bool is_new = std::find(normalized.begin(), normalized.end(), k) != normalized.end();
    out.push_back(is_new ? Dim(1) : *next++);
  }
  ctx.set_output(0, dtype, Shape(out));
  pass_known_through(ctx, out_rank);
}

std::vector<Tensor> fold_unsqueeze(const FoldContext& ctx) {
  const Tensor& data = ctx.inputs[0];
  std::vector<int64_t> axes = fold_int_list(ctx, "axes", 1, kAxesInputSince).value_or(std::vector<int64_t>{});
  int64_t out_rank = data.rank() + static_cast<int64_t>(axes.size());
  auto is_new = unsqueezed_positions(axes, out_rank);
  if (!is_new) fail_fold(ctx, "invalid axes " + ints_to_string(axes) + " for output rank " + std::to_string(out_rank));
  std::vector<int64_t> sizes;
  auto next = data.sizes().begin();
  for (int64_t k = 0; k < out_rank; ++k) sizes.push_back((*is_new)[k] ? 1 : *next++);
  return {data.clone().reshaped(sizes)};
}

void infer_squeeze(InferContext& ctx) {
  IntList axes = read_int_list(ctx, "axes", 1, kAxesInputSince);
  const Shape& in = ctx.input_shape(0);
  DType dtype = ctx.input_dtype(0);
  if (!in.rank_known || (axes.given && !axes.values)) {
    bool rank_follows = in.rank_known && axes.count && *axes.count <= in.rank();
    ctx.set_output(0, dtype, rank_follows ? Shape(std::vector<Dim>(in.rank() - *axes.count)) : Shape::unknown_rank());
    return;
  }
  std::vector<Dim> out;
  if (!axes.given) {
    for (const Dim& d : in.dims) {
      if (!d.is_static()) {  // it may or may not be 1 at run time: the rank is unknown
        ctx.set_output(0, dtype, Shape::unknown_rank());
        return;
      }
      if (d.value() != 1) out.push_back(d);
    }
  } else {
    std::vector<int64_t> normalized = checked_axes(ctx, *axes.values, in.rank());
    for (int64_t k = 0; k < in.rank(); ++k) {
      const Dim& d = in.dims[k];
      bool squeezed = std::find(normalized.begin(), normalized.end(), k) != normalized.end();
      if (squeezed && d.is_static() && d.value() != 1) {
        fail_op(ctx, "cannot squeeze axis " + std::to_string(k) + " of size " + std::to_string(d.value()) +
                         " (input shape " + in.to_string() + ")");
      }
      if (!squeezed) out.push_back(d);
    }
  }
  ctx.set_output(0, dtype, Shape(out));
  pass_known_through(ctx, static_cast<int64_t>(out.size()));
}

std::vector<Tensor> fold_squeeze(const FoldContext& ctx) {
  const Tensor& data = ctx.inputs[0];
  auto axes = fold_int_list(ctx, "axes", 1, kAxesInputSince);
  std::vector<bool> squeezed(data.rank(), !axes);
  for (int64_t axis : axes.value_or(std::vector<int64_t>{})) {
    auto a = normalize_axis(axis, data.rank());
    if (!a || data.sizes()[*a] != 1) fail_fold(ctx, "cannot squeeze axis " + std::to_string(axis));
    squeezed[*a] = true;
  }
  std::vector<int64_t> sizes;
  for (int64_t k = 0; k < data.rank(); ++k)
    if (!squeezed[k] || data.sizes()[k] != 1) sizes.push_back(data.sizes()[k]);
  return {data.clone().reshaped(sizes)};
}

}  // namespace

void register_squeeze_ops(OpRegistry& registry) {
  registry.add({.op_type = "Squeeze",
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_squeeze,
                .cost = no_flops,
                .fold = fold_squeeze});
  registry.add({.op_type = "Unsqueeze",
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_unsqueeze,
                .cost = no_flops,
                .fold = fold_unsqueeze});
}

}  // namespace onnxtrain
