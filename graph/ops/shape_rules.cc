#include "graph/ops/shape_rules.h"

#include "graph/ops/op_helpers.h"

namespace onnxtrain::shape_ops {

using namespace op_helpers;

Dim dims_product(const std::vector<Dim>& dims, size_t begin, size_t end) {
  Dim p(1);
  for (size_t i = begin; i < end; ++i) p = p * dims[i];
  return p;
}

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
  if (ctx.has_input(input)) return ctx.input_ints(input);
  return std::nullopt;
}

OpCost no_flops(const CostContext&) { return {0, 0}; }

}  // namespace onnxtrain::shape_ops
