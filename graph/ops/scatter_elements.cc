// ScatterElements (opset 11, 13, 16: reduction none/add/mul, 18: max/min too): out = a copy of data, then
// for every position p of indices, out[p with the coordinate along `axis` replaced by indices[p]] is set
// to updates[p] (reduction "none") or combined with it (add, mul, max, min), in row-major order of p. data,
// indices and updates have one rank r >= 1; indices and updates one shape, no longer than data off the
// axis. Negative indices count from the end. The output has data's shape and dtype. Cost: data movement,
// plus one FLOP per update element when a reduction combines them.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;

void infer_scatter_elements(InferContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  const Shape& indices = ctx.input_shape(1);
  const Shape& updates = ctx.input_shape(2);
  if (ctx.input_dtype(1) != DType::Int64 && ctx.input_dtype(1) != DType::Int32) {
    fail_op(ctx, "indices must be int32 or int64, got " + std::string(dtype_name(ctx.input_dtype(1))));
  }
  require_same_dtype(ctx, 2, 0);
  check_scatter_reduction(ctx);
  if (data.rank_known && data.rank() == 0) fail_op(ctx, "data must have rank >= 1, got a scalar");
  if (indices.rank_known && updates.rank_known) {
    bool same = indices.rank() == updates.rank();
    for (int64_t k = 0; same && k < indices.rank(); ++k) {
      const Dim &i = indices.dims[k], &u = updates.dims[k];
      same = !(i.is_static() && u.is_static() && i.value() != u.value());
    }
    if (!same)
      fail_op(ctx, "updates " + updates.to_string() + " must have the shape of indices " + indices.to_string());
  }
  if (data.rank_known && indices.rank_known) {
    if (indices.rank() != data.rank()) {
      fail_op(ctx, "indices " + indices.to_string() + " must have the rank of data " + data.to_string());
    }
    const int64_t axis = checked_axis(ctx, ctx.node().attr_int("axis", 0), data.rank());
    for (int64_t k = 0; k < data.rank(); ++k) {
      const Dim &d = data.dims[k], &i = indices.dims[k];
      if (k != axis && d.is_static() && i.is_static() && i.value() > d.value()) {
        fail_op(ctx, "indices " + indices.to_string() + " are longer than data " + data.to_string() + " along axis " +
                         std::to_string(k) + ", which is not the scatter axis " + std::to_string(axis));
      }
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), data);
}

}  // namespace

void register_scatter_elements_op(OpRegistry& registry) {
  registry.add({.op_type = "ScatterElements",
                .min_inputs = 3,
                .max_inputs = 3,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable, InputKind::Data},
                .infer = infer_scatter_elements,
                .cost = scatter_cost});
}

}  // namespace onnxtrain
