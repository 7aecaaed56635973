// GatherElements (opset 11, 13): out[i_0, ..., i_{r-1}] = data[i_0, ..., indices[i_0, ..., i_{r-1}], ..., i_{r-1}],
// the index replacing the coordinate along `axis` (numpy's take_along_axis). data and indices have the same
// rank r >= 1 and the output has the indices' shape and the data's dtype. Off the axis an index position's
// coordinates address the data directly, so there the indices may be shorter than the data, never longer.
// Negative indices count from the end. Data movement: no FLOPs.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;

void infer_gather_elements(InferContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  const Shape& indices = ctx.input_shape(1);
  if (ctx.input_dtype(1) != DType::Int64 && ctx.input_dtype(1) != DType::Int32) {
    fail_op(ctx, "indices must be int32 or int64, got " + std::string(dtype_name(ctx.input_dtype(1))));
  }
  if (data.rank_known && data.rank() == 0) fail_op(ctx, "data must have rank >= 1, got a scalar");
  if (data.rank_known && indices.rank_known) {
    if (indices.rank() != data.rank()) {
      fail_op(ctx, "indices " + indices.to_string() + " must have the rank of data " + data.to_string());
    }
    const int64_t axis = checked_axis(ctx, ctx.node().attr_int("axis", 0), data.rank());
    for (int64_t k = 0; k < data.rank(); ++k) {
      const Dim &d = data.dims[k], &i = indices.dims[k];
      if (k != axis && d.is_static() && i.is_static() && i.value() > d.value()) {
        fail_op(ctx, "indices " + indices.to_string() + " are longer than data " + data.to_string() + " along axis " +
                         std::to_string(k) + ", which is not the gather axis " + std::to_string(axis));
      }
    }
    if (auto values = ctx.input_ints(1); values && data.dims[axis].is_static()) {
      const int64_t n = data.dims[axis].value();
      for (int64_t v : *values) {
        if (v < -n || v >= n) {
          fail_op(ctx, "index " + std::to_string(v) + " is out of range for axis " + std::to_string(axis) +
                           " of size " + std::to_string(n) + " (data shape " + data.to_string() + ")");
        }
      }
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), indices);
}

}  // namespace

void register_gather_elements_op(OpRegistry& registry) {
  registry.add({.op_type = "GatherElements",
                .min_inputs = 2,
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_gather_elements,
                .cost = shape_ops::no_flops});
}

}  // namespace onnxtrain
