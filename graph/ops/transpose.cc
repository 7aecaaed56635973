// Transpose (opset 1, 13): permutes dims by `perm` (default: reversed).
#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;
using namespace shape_ops;

bool is_permutation_of_rank(const std::vector<int64_t>& perm, int64_t rank) {
  if (static_cast<int64_t>(perm.size()) != rank) return false;
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) return false;
    seen[p] = true;
  }
  return true;
}

void infer_transpose(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  DType dtype = ctx.input_dtype(0);
  const Node& node = ctx.node();
  if (!in.rank_known) {
    ctx.set_output(
        0, dtype,
        node.has_attribute("perm") ? Shape(std::vector<Dim>(node.attr_ints("perm").size())) : Shape::unknown_rank());
    return;
  }
  std::vector<int64_t> perm = transpose_perm(node, in.rank());
  if (!is_permutation_of_rank(perm, in.rank())) {
    fail_op(ctx, "perm " + ints_to_string(perm) + " is not a permutation of 0.." + std::to_string(in.rank() - 1) +
                     " for input shape " + in.to_string());
  }
  Shape out;
  for (int64_t p : perm) out.dims.push_back(in.dims[p]);
  ctx.set_output(0, dtype, out);
  if (auto known = ctx.input_known(0); known && in.rank() <= 1) set_known_output(ctx, 0, dtype, *known);
}

std::vector<Tensor> fold_transpose(const FoldContext& ctx) {
  const Tensor& data = ctx.inputs[0];
  std::vector<int64_t> perm = transpose_perm(ctx.node, data.rank());
  if (!is_permutation_of_rank(perm, data.rank()))
    fail_fold(ctx, "perm " + ints_to_string(perm) + " is not a permutation");
  std::vector<int64_t> in_strides = row_major_strides(data.sizes()), sizes, strides;
  for (int64_t p : perm) {
    sizes.push_back(data.sizes()[p]);
    strides.push_back(in_strides[p]);
  }
  return {strided_copy(data, sizes, 0, strides)};
}

}  // namespace

void register_transpose_ops(OpRegistry& registry) {
  registry.add({.op_type = "Transpose",
                .input_kinds = {InputKind::Data},
                .infer = infer_transpose,
                .cost = no_flops,
                .fold = fold_transpose});
}

}  // namespace onnxtrain
