// Trilu (opset 14): the upper (upper=1, the default) or lower triangle of the last two dims of x, from
// diagonal k (the optional int64 scalar input, default 0); the rest is zero. Exporters build causal masks
// with it (torch.triu/tril). The gradient keeps the same triangle of dY (rules/trilu.cc).
#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;
using shape_ops::no_flops;

void infer_trilu(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (x.rank_known && x.rank() < 2) fail_op(ctx, "x must have rank >= 2, got " + x.to_string());
  if (ctx.has_input(1)) {
    require_integer(ctx, 1);
    require_scalar(ctx, 1, "k");
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
}

std::vector<Tensor> fold_trilu(const FoldContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const int64_t k = ctx.has_input(1) ? ctx.input_ints(1).at(0) : 0;
  const bool upper = ctx.node.attr_int("upper", 1) != 0;
  const int64_t rows = x.sizes()[x.rank() - 2], cols = x.sizes()[x.rank() - 1];
  std::vector<Tensor> result;
  visit_fold_type(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> v = elements_as<T>(x);
    for (size_t at = 0; at < v.size(); ++at) {
      const auto flat = static_cast<int64_t>(at), i = flat / cols % rows, j = flat % cols;
      if (upper ? j - i < k : j - i > k) v[at] = T{};
    }
    result.push_back(tensor_from(x.dtype(), x.sizes(), v));
  });
  return result;
}

}  // namespace

void register_trilu_op(OpRegistry& registry) {
  registry.add({.op_type = "Trilu",
                .min_inputs = 1,
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_trilu,
                .cost = no_flops,
                .fold = fold_trilu});
}

}  // namespace onnxtrain
