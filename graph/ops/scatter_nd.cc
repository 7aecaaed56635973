// ScatterND (opset 11, 13, 16: reduction none/add/mul, 18: max/min too): out = a copy of data, then each
// row of the last indices axis, k coordinates, names the slice data[i_0, ..., i_{k-1}, :] of the data's
// trailing dims, which is set to that row's slice of updates (reduction "none") or combined with it (add,
// mul, max, min), rows in row-major order. updates has the shape indices.shape[:-1] + data.shape[k:].
// Negative coordinates count from the end. The output has data's shape and dtype. Cost: data movement,
// plus one FLOP per update element when a reduction combines them.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;

void infer_scatter_nd(InferContext& ctx) {
  const Shape& data = ctx.input_shape(0);
  const Shape& indices = ctx.input_shape(1);
  const Shape& updates = ctx.input_shape(2);
  if (ctx.input_dtype(1) != DType::Int64 && ctx.input_dtype(1) != DType::Int32) {
    fail_op(ctx, "indices must be int32 or int64, got " + std::string(dtype_name(ctx.input_dtype(1))));
  }
  require_same_dtype(ctx, 2, 0);
  check_scatter_reduction(ctx);
  if (data.rank_known && data.rank() == 0) fail_op(ctx, "data must have rank >= 1, got a scalar");
  if (indices.rank_known && indices.rank() == 0) fail_op(ctx, "indices must have rank >= 1, got a scalar");
  if (data.rank_known && indices.rank_known && indices.dims.back().is_static()) {
    const int64_t k = indices.dims.back().value();
    if (k < 1 || k > data.rank()) {
      fail_op(ctx, "the last axis of indices " + indices.to_string() + " must be 1.." + std::to_string(data.rank()) +
                       " (coordinates into data " + data.to_string() + ")");
    }
    std::vector<Dim> expected(indices.dims.begin(), indices.dims.end() - 1);
    expected.insert(expected.end(), data.dims.begin() + k, data.dims.end());
    bool fits = !updates.rank_known || updates.rank() == static_cast<int64_t>(expected.size());
    for (size_t d = 0; fits && updates.rank_known && d < expected.size(); ++d) {
      const Dim &u = updates.dims[d], &e = expected[d];
      fits = !(u.is_static() && e.is_static() && u.value() != e.value());
    }
    if (!fits) {
      fail_op(ctx, "updates " + updates.to_string() + " must have the shape indices[:-1] + data[" + std::to_string(k) +
                       ":] = " + dims_to_string(expected));
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), data);
}

}  // namespace

void register_scatter_nd_op(OpRegistry& registry) {
  registry.add({.op_type = "ScatterND",
                .min_inputs = 3,
                .max_inputs = 3,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable, InputKind::Data},
                .infer = infer_scatter_nd,
                .cost = scatter_cost});
}

}  // namespace onnxtrain
