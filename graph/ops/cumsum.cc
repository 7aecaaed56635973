// CumSum (opset 11, 14: adds float16/bfloat16): running sums of x along the axis given by the scalar
// input `axis`; `exclusive` leaves out the element itself, `reverse` sums from the end. Exporters emit it
// on int64 masks (position ids from an attention mask: cumsum(mask) - 1), so it also folds constants.
// The gradient of a running sum is the running sum of dY in the other direction (rules/cumsum.cc).
#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;

void infer_cumsum(InferContext& ctx) {
  require_numeric(ctx, 0);
  require_integer(ctx, 1);
  require_scalar(ctx, 1, "axis");
  const Shape& x = ctx.input_shape(0);
  if (auto axis = ctx.input_ints(1); axis && x.rank_known) {
    if (x.rank() == 0) fail_op(ctx, "x must have rank >= 1, got a scalar");
    checked_axis(ctx, (*axis)[0], x.rank());
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
}

std::vector<Tensor> fold_cumsum(const FoldContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  auto axis = normalize_axis(ctx.input_ints(1).at(0), x.rank());
  if (!axis) fail_fold(ctx, "axis is out of range for x of rank " + std::to_string(x.rank()));
  const bool exclusive = ctx.node.attr_int("exclusive", 0) != 0, reverse = ctx.node.attr_int("reverse", 0) != 0;
  int64_t outer = 1, n = x.sizes()[*axis], inner = 1;
  for (int64_t k = 0; k < *axis; ++k) outer *= x.sizes()[k];
  for (int64_t k = *axis + 1; k < x.rank(); ++k) inner *= x.sizes()[k];
  std::vector<Tensor> result;
  visit_fold_type(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::vector<T> in = elements_as<T>(x);
    std::vector<T> out(in.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        T sum{};
        for (int64_t step = 0; step < n; ++step) {
          const int64_t j = reverse ? n - 1 - step : step, at = (o * n + j) * inner + i;
          if (exclusive) out[at] = sum;
          sum = static_cast<T>(sum + in[at]);
          if (!exclusive) out[at] = sum;
        }
      }
    result.push_back(tensor_from(x.dtype(), x.sizes(), out));
  });
  return result;
}

OpCost cumsum_cost(const CostContext& ctx) {  // one addition per element, the same backward
  const auto n = static_cast<double>(ctx.output_numel(0));
  return {n, n};
}

}  // namespace

void register_cumsum_op(OpRegistry& registry) {
  registry.add({.op_type = "CumSum",
                .min_inputs = 2,
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_cumsum,
                .cost = cumsum_cost,
                .fold = fold_cumsum});
}

}  // namespace onnxtrain
