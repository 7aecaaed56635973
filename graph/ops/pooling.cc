// MaxPool (optional int64 Indices output), AveragePool, GlobalAveragePool, GlobalMaxPool over
// X (N,C,D1..Dn). Output spatial sizes follow ONNX (floor, or ceil with ceil_mode, where the last window
// must start inside the input or its leading padding, as in PyTorch); auto_pad SAME gives ceil(D/stride).
// Cost: one FLOP per window element per output element, forward and backward; global pools the input numel.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

// The pooled shape of X, or nullopt when X's rank is unknown.
std::optional<Shape> pooled_shape(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Node& node = ctx.node();
  if (!node.has_attribute("kernel_shape")) fail_op(ctx, "the kernel_shape attribute is required");
  const std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (!x.rank_known) return std::nullopt;
  require_spatial_input(ctx, x);
  const size_t spatial = static_cast<size_t>(x.rank() - 2);
  const WindowSpec window = read_window(ctx, spatial, std::vector<Dim>(kernel.begin(), kernel.end()));
  Shape out({x.dims[0], x.dims[1]});
  for (size_t i = 0; i < spatial; ++i) out.dims.push_back(window_output_dim(ctx, x.dims[i + 2], i, window));
  return out;
}

void infer_max_pool(InferContext& ctx) {
  require_numeric(ctx, 0);
  const int64_t storage_order = ctx.node().attr_int("storage_order", 0);
  if (storage_order != 0 && storage_order != 1) {
    fail_op(ctx, "storage_order must be 0 (row major) or 1 (column major), got " + std::to_string(storage_order));
  }
  if (ctx.has_output(1) && ctx.opset() < 8) fail_op(ctx, "the Indices output needs opset 8 or later");
  const Shape out = pooled_shape(ctx).value_or(Shape::unknown_rank());
  ctx.set_output(0, ctx.input_dtype(0), out);
  ctx.set_output(1, DType::Int64, out);
}

void infer_average_pool(InferContext& ctx) {
  require_floating(ctx, 0);
  const int64_t count_include_pad = ctx.node().attr_int("count_include_pad", 0);
  if (count_include_pad != 0 && count_include_pad != 1) {
    fail_op(ctx, "count_include_pad must be 0 or 1, got " + std::to_string(count_include_pad));
  }
  ctx.set_output(0, ctx.input_dtype(0), pooled_shape(ctx).value_or(Shape::unknown_rank()));
}

void infer_global_pool(InferContext& ctx) {
  require_numeric(ctx, 0);
  const Shape& x = ctx.input_shape(0);
  if (!x.rank_known) return ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
  if (x.rank() < 2) fail_op(ctx, "input must be (N,C,D1,...), got shape " + x.to_string());
  Shape out({x.dims[0], x.dims[1]});
  for (int64_t i = 2; i < x.rank(); ++i) out.dims.emplace_back(1);
  ctx.set_output(0, ctx.input_dtype(0), out);
}

OpCost window_pool_cost(const CostContext& ctx) {
  double window = 1;
  for (int64_t k : ctx.node.attr_ints("kernel_shape")) window *= static_cast<double>(k);
  const double flops = window * static_cast<double>(ctx.output_numel(0));
  return {flops, flops};
}

constexpr auto global_pool_cost = &flops_per_input_element<1, 1>;

OpSchema pool_schema(const char* name, void (*infer)(InferContext&), OpCost (*cost)(const CostContext&),
                     int max_outputs) {
  return {.op_type = name,
          .min_inputs = 1,
          .max_inputs = 1,
          .max_outputs = max_outputs,
          .input_kinds = {InputKind::Data},
          .infer = infer,
          .cost = cost};
}

}  // namespace

void register_pooling_ops(OpRegistry& registry) {
  registry.add(pool_schema("MaxPool", &infer_max_pool, &window_pool_cost, 2));
  registry.add(pool_schema("AveragePool", &infer_average_pool, &window_pool_cost, 1));
  registry.add(pool_schema("GlobalAveragePool", &infer_global_pool, global_pool_cost, 1));
  registry.add(pool_schema("GlobalMaxPool", &infer_global_pool, global_pool_cost, 1));
}

}  // namespace onnxtrain
