// Gather (opset 1, 11: negative indices, 13): picks slices of `data` along `axis` by `indices`. The
// data is differentiable (an embedding table); a constant index into a known shape vector (Gather of
// Shape(x)) propagates the picked dims.
#include <cstring>

#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;
using namespace shape_ops;

void infer_gather(InferContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  const Shape& indices = ctx.input_shape(1);
  DType dtype = ctx.input_dtype(0);
  if (ctx.input_dtype(1) != DType::Int64 && ctx.input_dtype(1) != DType::Int32) {
    fail_op(ctx, "indices must be int32 or int64, got " + std::string(dtype_name(ctx.input_dtype(1))));
  }
  if (data.rank_known && data.rank() == 0) fail_op(ctx, "data must have rank >= 1, got a scalar");
  if (!data.rank_known || !indices.rank_known) {
    ctx.set_output(0, dtype, Shape::unknown_rank());
    return;
  }
  int64_t axis = checked_axis(ctx, ctx.node().attr_int("axis", 0), data.rank());
  std::vector<Dim> out(data.dims.begin(), data.dims.begin() + axis);
  out.insert(out.end(), indices.dims.begin(), indices.dims.end());
  out.insert(out.end(), data.dims.begin() + axis + 1, data.dims.end());
  ctx.set_output(0, dtype, Shape(out));

  auto index_values = ctx.input_ints(1);
  if (!index_values) return;
  const Dim& size = data.dims[axis];
  for (int64_t i : *index_values) {
    if (size.is_static() && (i < -size.value() || i >= size.value())) {
      fail_op(ctx, "index " + std::to_string(i) + " is out of range for axis " + std::to_string(axis) + " of size " +
                       std::to_string(size.value()) + " (data shape " + data.to_string() + ")");
    }
  }
  auto known = ctx.input_known(0);
  if (!known || data.rank() != 1 || indices.rank() > 1) return;
  const auto length = static_cast<int64_t>(known->size());
  std::vector<Dim> picked;
  for (int64_t i : *index_values) {
    if (i < -length || i >= length) return;
    picked.push_back((*known)[i < 0 ? i + length : i]);
  }
  set_known_output(ctx, 0, dtype, picked);
}

std::vector<Tensor> fold_gather(const FoldContext& ctx) {
  const Tensor& data = ctx.inputs[0];
  const auto& sizes = data.sizes();
  auto axis = normalize_axis(ctx.node.attr_int("axis", 0), data.rank());
  if (!axis) fail_fold(ctx, "axis is out of range for data of rank " + std::to_string(data.rank()));
  std::vector<int64_t> indices = ctx.input_ints(1);
  int64_t outer = 1, inner = 1, n = sizes[*axis];
  for (int64_t k = 0; k < *axis; ++k) outer *= sizes[k];
  for (int64_t k = *axis + 1; k < data.rank(); ++k) inner *= sizes[k];

  std::vector<int64_t> out_sizes(sizes.begin(), sizes.begin() + *axis);
  out_sizes.insert(out_sizes.end(), ctx.inputs[1].sizes().begin(), ctx.inputs[1].sizes().end());
  out_sizes.insert(out_sizes.end(), sizes.begin() + *axis + 1, sizes.end());
  Tensor out(data.dtype(), out_sizes);
  const size_t chunk = static_cast<size_t>(inner) * dtype_size(data.dtype());
  const auto count = static_cast<int64_t>(indices.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < count; ++j) {
      int64_t i = indices[j] < 0 ? indices[j] + n : indices[j];
      if (i < 0 || i >= n)
        fail_fold(ctx, "index " + std::to_string(indices[j]) + " is out of range for size " + std::to_string(n));
      if (chunk) std::memcpy(out.raw() + (o * count + j) * chunk, data.raw() + (o * n + i) * chunk, chunk);
    }
  }
  return {out};
}

}  // namespace

void register_gather_ops(OpRegistry& registry) {
  registry.add({.op_type = "Gather",
                .min_inputs = 2,
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_gather,
                .cost = no_flops,
                .fold = fold_gather});
}

}  // namespace onnxtrain
