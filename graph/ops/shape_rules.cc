#include "graph/ops/shape_rules.h"

#include <set>

#include "graph/error.h"

namespace onnxtrain::shape_ops {

void fail_op(const InferContext& ctx, const std::string& message) { ctx.fail(ctx.node().op_type + ": " + message); }

void fail_fold(const FoldContext& ctx, const std::string& message) {
  const Node& n = ctx.node;
  throw Error(n.op_type + ": " + message).at_node(n.name, n.op_type, n.domain, n.opset);
}

std::string dims_to_string(const std::vector<Dim>& dims) { return Shape(dims).to_string(); }

std::string ints_to_string(const std::vector<int64_t>& values) { return Shape::of(values).to_string(); }

Dim dims_product(const std::vector<Dim>& dims, size_t begin, size_t end) {
  Dim p(1);
  for (size_t i = begin; i < end; ++i) p = p * dims[i];
  return p;
}

int64_t checked_axis(const InferContext& ctx, int64_t axis, int64_t rank, const std::string& what) {
  auto a = normalize_axis(axis, rank);
  if (!a) {
    fail_op(ctx, what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank) +
                     (rank > 0 ? " (expected " + std::to_string(-rank) + ".." + std::to_string(rank - 1) + ")"
                               : " (a scalar has no axes)"));
  }
  return *a;
}

std::vector<int64_t> checked_axes(const InferContext& ctx, const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> normalized;
  std::set<int64_t> seen;
  for (int64_t axis : axes) {
    int64_t a = checked_axis(ctx, axis, rank);
    if (!seen.insert(a).second)
      fail_op(ctx, "axis " + std::to_string(axis) + " is repeated in " + ints_to_string(axes));
    normalized.push_back(a);
  }
  return normalized;
}

Shape broadcast_or_fail(const InferContext& ctx, const Shape& a, const Shape& b) {
  auto s = broadcast_shapes(a, b);
  if (!s) fail_op(ctx, "shapes " + a.to_string() + " and " + b.to_string() + " cannot broadcast");
  return *s;
}

void require_same_dtype(const InferContext& ctx, size_t i, size_t reference) {
  if (ctx.input_dtype(i) != ctx.input_dtype(reference)) {
    fail_op(ctx, "input " + std::to_string(i) + " has dtype " + std::string(dtype_name(ctx.input_dtype(i))) +
                     ", expected " + std::string(dtype_name(ctx.input_dtype(reference))) + " like input " +
                     std::to_string(reference) + " (inputs must have the same type)");
  }
}

bool is_int_or_bool(DType dtype) { return is_integer(dtype) || dtype == DType::Bool; }

void set_known_output(InferContext& ctx, size_t i, DType dtype, std::vector<Dim> values) {
  if (is_int_or_bool(dtype) && values.size() <= kMaxKnownElements) ctx.set_output_known(i, std::move(values));
}

std::optional<std::vector<int64_t>> static_values(const std::vector<Dim>& dims) {
  std::vector<int64_t> values;
  for (const Dim& d : dims) {
    if (!d.is_static()) return std::nullopt;
    values.push_back(d.value());
  }
  return values;
}

IntList read_int_list(const InferContext& ctx, const std::string& name, size_t input, int input_since) {
  const Node& node = ctx.node();
  IntList list;
  bool as_input = ctx.opset() >= input_since;
  if (as_input && node.has_attribute(name)) {
    fail_op(ctx, "since opset " + std::to_string(input_since) + " '" + name +
                     "' is an input, not an attribute (the model imports opset " + std::to_string(ctx.opset()) + ")");
  }
  if (!as_input && node.has_attribute(name)) {
    list.given = true;
    list.values = node.attr_ints(name);
  } else if (ctx.has_input(input)) {  // also the optional input of Split-1
    list.given = true;
    list.values = ctx.input_ints(input);
    const Shape& s = ctx.input_shape(input);
    if (s.rank_known && s.rank() > 1) fail_op(ctx, "'" + name + "' must be 1-D, got shape " + s.to_string());
    if (s.rank_known && s.rank() == 1 && s.dims[0].is_static()) list.count = s.dims[0].value();
  }
  if (list.values) list.count = static_cast<int64_t>(list.values->size());
  return list;
}

std::optional<std::vector<int64_t>> fold_int_list(const FoldContext& ctx, const std::string& name, size_t input,
                                                  int input_since) {
  if (ctx.node.opset < input_since && ctx.node.has_attribute(name)) return ctx.node.attr_ints(name);
  if (ctx.has_input(input)) return ctx.inputs[input].to_int64();
  return std::nullopt;
}

OpCost no_flops(const CostContext&) { return {0, 0}; }

OpCost one_flop_per_output_no_backward(const CostContext& ctx) { return {static_cast<double>(ctx.output_numel(0)), 0}; }

}  // namespace onnxtrain::shape_ops
