// Where (opset 9, 16), the comparisons Equal, Less, LessOrEqual, Greater, GreaterOrEqual (bool
// outputs) and the logical Not, And, Or, Xor. All broadcast like numpy. Equal and Where of known
// vectors stay known where the answer does not depend on a symbol (the Expand shape chains use them).
#include <functional>

#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;
using namespace shape_ops;

// a == b for known shape values: nullopt when it depends on what a symbol is bound to.
std::optional<bool> known_equal(const Dim& a, const Dim& b) {
  if (a == b) return true;
  if (a.is_static() && b.is_static()) return false;
  if ((a.is_symbolic() && b.is_static() && b.value() < 0) || (b.is_symbolic() && a.is_static() && a.value() < 0)) {
    return false;  // symbols in known values are sizes, never negative
  }
  return std::nullopt;
}

void infer_comparison(InferContext& ctx) {
  require_same_dtype(ctx, 1);
  Shape out = broadcast_or_fail(ctx, ctx.input_shape(0), ctx.input_shape(1));
  ctx.set_output(0, DType::Bool, out);
  if (ctx.node().op_type != "Equal") return;
  auto operands = known_operands(ctx, out, {0, 1});
  if (!operands) return;
  std::vector<Dim> values;
  for (size_t i = 0; i < (*operands)[0].size(); ++i) {
    auto equal = known_equal((*operands)[0][i], (*operands)[1][i]);
    if (!equal) return;
    values.emplace_back(*equal ? 1 : 0);
  }
  set_known_output(ctx, 0, DType::Bool, values);
}

std::function<bool(double, double)> compare_doubles(const std::string& op) {
  if (op == "Equal") return std::equal_to<double>();
  if (op == "Less") return std::less<double>();
  if (op == "LessOrEqual") return std::less_equal<double>();
  if (op == "Greater") return std::greater<double>();
  return std::greater_equal<double>();
}

std::function<bool(int64_t, int64_t)> compare_ints(const std::string& op) {
  if (op == "Equal") return std::equal_to<int64_t>();
  if (op == "Less") return std::less<int64_t>();
  if (op == "LessOrEqual") return std::less_equal<int64_t>();
  if (op == "Greater") return std::greater<int64_t>();
  return std::greater_equal<int64_t>();
}

std::vector<Tensor> fold_comparison(const FoldContext& ctx) {
  std::vector<Tensor> in = broadcast_inputs(ctx);
  Tensor out(DType::Bool, in[0].sizes());
  const bool floating = is_floating(in[0].dtype()) || is_floating(in[1].dtype());
  auto by_double = compare_doubles(ctx.node.op_type);
  auto by_int = compare_ints(ctx.node.op_type);
  for (int64_t i = 0; i < out.numel(); ++i) {
    bool r = floating ? by_double(read_as_double(in[0], i), read_as_double(in[1], i))
                      : by_int(read_as_int64(in[0], i), read_as_int64(in[1], i));
    write_from_int64(out, i, r);
  }
  return {out};
}

void require_bool(const InferContext& ctx, size_t i) {
  if (ctx.input_dtype(i) != DType::Bool) {
    fail_op(ctx, "input " + std::to_string(i) + " must be bool, got " + std::string(dtype_name(ctx.input_dtype(i))));
  }
}

void infer_where(InferContext& ctx) {
  require_bool(ctx, 0);
  require_same_dtype(ctx, 2, 1);
  DType dtype = ctx.input_dtype(1);
  Shape out =
      broadcast_or_fail(ctx, broadcast_or_fail(ctx, ctx.input_shape(0), ctx.input_shape(1)), ctx.input_shape(2));
  ctx.set_output(0, dtype, out);
  auto operands = known_operands(ctx, out, {0, 1, 2});
  if (!operands) return;
  std::vector<Dim> values;
  for (size_t i = 0; i < (*operands)[0].size(); ++i) {
    const Dim& condition = (*operands)[0][i];
    if (!condition.is_static()) return;
    values.push_back(condition.value() ? (*operands)[1][i] : (*operands)[2][i]);
  }
  set_known_output(ctx, 0, dtype, values);
}

std::vector<Tensor> fold_where(const FoldContext& ctx) {
  std::vector<Tensor> in = broadcast_inputs(ctx);
  Tensor out(in[1].dtype(), in[0].sizes());
  for (int64_t i = 0; i < out.numel(); ++i) copy_element(read_as_int64(in[0], i) ? in[1] : in[2], i, out, i);
  return {out};
}

void infer_not(InferContext& ctx) {
  require_bool(ctx, 0);
  ctx.set_output(0, DType::Bool, ctx.input_shape(0));
}

// IsNaN (opset 9, 13): a bool per element of a float tensor. Exporters emit it in masked attention
// (transformers' sdpa path replaces the NaN rows of fully masked softmaxes).
void infer_is_nan(InferContext& ctx) {
  require_floating(ctx, 0);
  ctx.set_output(0, DType::Bool, ctx.input_shape(0));
}

void infer_logical(InferContext& ctx) {
  require_bool(ctx, 0);
  require_bool(ctx, 1);
  ctx.set_output(0, DType::Bool, broadcast_or_fail(ctx, ctx.input_shape(0), ctx.input_shape(1)));
}

std::vector<Tensor> fold_logical(const FoldContext& ctx) {
  std::vector<Tensor> in = broadcast_inputs(ctx);
  const std::string& op = ctx.node.op_type;
  Tensor out(DType::Bool, in[0].sizes());
  for (int64_t i = 0; i < out.numel(); ++i) {
    bool a = read_as_int64(in[0], i) != 0;
    bool b = in.size() > 1 && read_as_int64(in[1], i) != 0;
    bool r = op == "Not" ? !a : op == "And" ? (a && b) : op == "Or" ? (a || b) : (a != b);
    write_from_int64(out, i, r);
  }
  return {out};
}

}  // namespace

void register_compare_logic_ops(OpRegistry& registry) {
  for (const char* op : {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"}) {
    registry.add({.op_type = op,
                  .min_inputs = 2,
                  .max_inputs = 2,
                  .input_kinds = {InputKind::NonDifferentiable},
                  .infer = infer_comparison,
                  .cost = flops_per_output_element<1, 0>,
                  .fold = fold_comparison});
  }
  for (const char* op : {"And", "Or", "Xor"}) {
    registry.add({.op_type = op,
                  .min_inputs = 2,
                  .max_inputs = 2,
                  .input_kinds = {InputKind::NonDifferentiable},
                  .infer = infer_logical,
                  .cost = flops_per_output_element<1, 0>,
                  .fold = fold_logical});
  }
  registry.add({.op_type = "Not",
                .input_kinds = {InputKind::NonDifferentiable},
                .infer = infer_not,
                .cost = flops_per_output_element<1, 0>,
                .fold = fold_logical});
  registry.add({.op_type = "IsNaN",
                .input_kinds = {InputKind::NonDifferentiable},
                .infer = infer_is_nan,
                .cost = flops_per_output_element<1, 0>});
  registry.add({.op_type = "Where",
                .min_inputs = 3,
                .max_inputs = 3,
                .input_kinds = {InputKind::NonDifferentiable, InputKind::Data, InputKind::Data},
                .infer = infer_where,
                .cost = flops_per_output_element<1, 0>,
                .fold = fold_where});
}

}  // namespace onnxtrain
