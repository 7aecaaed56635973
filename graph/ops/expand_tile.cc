// Expand (opset 8, 13: broadcast to a shape input) and Tile (opset 6, 13: repeat along each axis).
// Both read their shape/repeats input through known values, so symbolic targets work.
#include <algorithm>

#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;
using namespace shape_ops;

// Fails unless input `i` is a 1-D vector; returns its length when static.
std::optional<int64_t> vector_length(const InferContext& ctx, size_t i, const std::string& what) {
  const Shape& s = ctx.input_shape(i);
  if (!s.rank_known) return std::nullopt;
  if (s.rank() != 1) fail_op(ctx, what + " must be 1-D, got shape " + s.to_string());
  return s.dims[0].is_static() ? std::optional<int64_t>(s.dims[0].value()) : std::nullopt;
}

void infer_expand(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  DType dtype = ctx.input_dtype(0);
  auto length = vector_length(ctx, 1, "shape");
  auto target = ctx.input_known(1);
  if (!target || !in.rank_known) {
    bool rank_follows = in.rank_known && length;
    ctx.set_output(0, dtype,
                   rank_follows ? Shape(std::vector<Dim>(std::max(in.rank(), *length))) : Shape::unknown_rank());
    return;
  }
  for (const Dim& d : *target)
    if (d.is_static() && d.value() < 0) fail_op(ctx, "shape " + dims_to_string(*target) + " has a negative size");
  auto out = broadcast_shapes(in, Shape(*target));
  if (!out) fail_op(ctx, "cannot expand " + in.to_string() + " to shape " + dims_to_string(*target));
  ctx.set_output(0, dtype, *out);

  auto known = ctx.input_known(0);
  if (!known || out->rank() != 1 || !out->dims[0].is_static()) return;
  const int64_t n = out->dims[0].value();
  if (known->size() != 1 && static_cast<int64_t>(known->size()) != n) return;
  std::vector<Dim> values;
  for (int64_t i = 0; i < n; ++i) values.push_back((*known)[known->size() == 1 ? 0 : i]);
  set_known_output(ctx, 0, dtype, values);
}

std::vector<Tensor> fold_expand(const FoldContext& ctx) {
  const Tensor& data = ctx.inputs[0];
  std::vector<int64_t> target = ctx.input_ints(1);
  auto sizes = broadcast_sizes(data.sizes(), target);
  if (!sizes) fail_fold(ctx, "cannot expand " + ints_to_string(data.sizes()) + " to shape " + ints_to_string(target));
  return {broadcast_to(data, *sizes)};
}

void infer_tile(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  DType dtype = ctx.input_dtype(0);
  auto length = vector_length(ctx, 1, "repeats");
  if (in.rank_known && length && *length != in.rank()) {
    fail_op(ctx, "repeats has " + std::to_string(*length) + " entries for an input of rank " +
                     std::to_string(in.rank()) + " (shape " + in.to_string() + ")");
  }
  auto repeats = ctx.input_known(1);
  if (!in.rank_known || !repeats) {
    ctx.set_output(0, dtype, in.rank_known ? Shape(std::vector<Dim>(in.rank())) : Shape::unknown_rank());
    return;
  }
  if (static_cast<int64_t>(repeats->size()) != in.rank()) {
    fail_op(ctx, "repeats " + dims_to_string(*repeats) + " has " + std::to_string(repeats->size()) +
                     " entries for an input of rank " + std::to_string(in.rank()));
  }
  Shape out = in;
  for (int64_t k = 0; k < in.rank(); ++k) {
    const Dim& r = (*repeats)[k];
    if (r.is_static() && r.value() < 0) fail_op(ctx, "repeats " + dims_to_string(*repeats) + " has a negative entry");
    out.dims[k] = in.dims[k] * r;
  }
  ctx.set_output(0, dtype, out);

  auto known = ctx.input_known(0);
  auto times = static_values(*repeats);
  if (!known || in.rank() != 1 || !times) return;
  std::vector<Dim> values;
  for (int64_t t = 0; t < (*times)[0]; ++t) values.insert(values.end(), known->begin(), known->end());
  set_known_output(ctx, 0, dtype, values);
}

std::vector<Tensor> fold_tile(const FoldContext& ctx) {
  const Tensor& data = ctx.inputs[0];
  std::vector<int64_t> repeats = ctx.input_ints(1);
  if (static_cast<int64_t>(repeats.size()) != data.rank()) fail_fold(ctx, "repeats must have one entry per dim");
  std::vector<int64_t> sizes = data.sizes();
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (repeats[k] < 0) fail_fold(ctx, "negative repeats");
    sizes[k] *= repeats[k];
  }
  Tensor out(data.dtype(), sizes);
  const std::vector<int64_t> in_strides = row_major_strides(data.sizes());
  int64_t linear = 0;
  for_each_index(sizes, [&](const std::vector<int64_t>& index) {
    int64_t source = 0;
    for (size_t k = 0; k < index.size(); ++k) source += (index[k] % data.sizes()[k]) * in_strides[k];
    copy_element(data, source, out, linear++);
  });
  return {out};
}

}  // namespace

void register_expand_tile_ops(OpRegistry& registry) {
  registry.add({.op_type = "Expand",
                .min_inputs = 2,
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_expand,
                .cost = no_flops,
                .fold = fold_expand});
  registry.add({.op_type = "Tile",
                .min_inputs = 2,
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_tile,
                .cost = no_flops,
                .fold = fold_tile});
}

}  // namespace onnxtrain
