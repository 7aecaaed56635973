// GatherND (opset 11, 12: batch_dims, 13): each row of the last indices axis, k coordinates, picks the
// slice data[batch..., i_0, ..., i_{k-1}, :] of the data's trailing dims. The first batch_dims axes of
// data and indices are batch axes (equal sizes; each batch picks from its own data). Output shape:
// indices.shape[:-1] + data.shape[batch_dims + k:], dtype of data. Negative coordinates count from the
// end. Data movement: no FLOPs.
#include <algorithm>

#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;

// Fails when a constant index coordinate lies outside its static data dim.
void check_known_indices(const InferContext& ctx, const Shape& data, int64_t batch_dims, int64_t k) {
  auto values = ctx.input_ints(1);
  if (!values) return;
  for (size_t p = 0; p < values->size(); ++p) {
    const int64_t axis = batch_dims + static_cast<int64_t>(p) % k;
    const Dim& size = data.dims[axis];
    const int64_t v = (*values)[p];
    if (size.is_static() && (v < -size.value() || v >= size.value())) {
      fail_op(ctx, "index " + std::to_string(v) + " is out of range for axis " + std::to_string(axis) + " of size " +
                       std::to_string(size.value()) + " (data shape " + data.to_string() + ")");
    }
  }
}

void infer_gather_nd(InferContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  const Shape& indices = ctx.input_shape(1);
  if (ctx.input_dtype(1) != DType::Int64 && ctx.input_dtype(1) != DType::Int32) {
    fail_op(ctx, "indices must be int32 or int64, got " + std::string(dtype_name(ctx.input_dtype(1))));
  }
  const int64_t batch_dims = ctx.node().attr_int("batch_dims", 0);
  if (batch_dims != 0 && ctx.opset() < 12) fail_op(ctx, "batch_dims needs opset 12");
  if (batch_dims < 0) fail_op(ctx, "batch_dims must be >= 0, got " + std::to_string(batch_dims));
  if (data.rank_known && data.rank() == 0) fail_op(ctx, "data must have rank >= 1, got a scalar");
  if (indices.rank_known && indices.rank() == 0) fail_op(ctx, "indices must have rank >= 1, got a scalar");
  if (!data.rank_known || !indices.rank_known) return ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
  const int64_t r = data.rank(), q = indices.rank();
  if (batch_dims >= std::min(r, q)) {
    fail_op(ctx, "batch_dims " + std::to_string(batch_dims) + " must be less than the ranks of data " +
                     data.to_string() + " and indices " + indices.to_string());
  }
  for (int64_t d = 0; d < batch_dims; ++d) {
    const Dim &a = data.dims[d], &b = indices.dims[d];
    if (a.is_static() && b.is_static() && a.value() != b.value()) {
      fail_op(ctx, "batch axis " + std::to_string(d) + " differs: data " + data.to_string() + ", indices " +
                       indices.to_string());
    }
  }
  const Dim& last = indices.dims[q - 1];
  if (!last.is_static()) return ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
  const int64_t k = last.value();
  if (k < 1 || k > r - batch_dims) {
    fail_op(ctx, "the last axis of indices " + indices.to_string() + " must be 1.." + std::to_string(r - batch_dims) +
                     " (coordinates into data " + data.to_string() + " after " + std::to_string(batch_dims) +
                     " batch axes)");
  }
  check_known_indices(ctx, data, batch_dims, k);
  std::vector<Dim> out(indices.dims.begin(), indices.dims.end() - 1);
  out.insert(out.end(), data.dims.begin() + batch_dims + k, data.dims.end());
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
}

}  // namespace

void register_gather_nd_op(OpRegistry& registry) {
  registry.add({.op_type = "GatherND",
                .min_inputs = 2,
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_gather_nd,
                .cost = shape_ops::no_flops});
}

}  // namespace onnxtrain
