// ReduceMean/Sum/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp and ArgMax/ArgMin. Reduce axes are an attribute before
// opset 13 (ReduceSum) or 18 (the others) and an optional int64 input from then on, where
// noop_with_empty_axes=1 turns "no axes" from "all axes" into identity. keepdims (default 1) keeps
// reduced dims as 1. ArgMax/ArgMin return int64 indices along one axis.
// Cost: the input numel forward and backward (2× for L2 and SumSquare); ArgMax/ArgMin have no backward.
#include <algorithm>
#include <limits>

#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

int axes_input_since(const Node& node) { return node.op_type == "ReduceSum" ? 13 : 18; }

// Shape arithmetic for ReduceSum/Prod/Max/Min of a known 1-D int vector (e.g. ReduceProd(Shape(x))).
Dim (*known_combiner(const std::string& op_type))(const Dim&, const Dim&) {
  if (op_type == "ReduceSum") return [](const Dim& a, const Dim& b) { return a + b; };
  if (op_type == "ReduceProd") return [](const Dim& a, const Dim& b) { return a * b; };
  if (op_type == "ReduceMax") return &dim_max;
  if (op_type == "ReduceMin") return &dim_min;
  return nullptr;
}

// The reduce axes as written (attribute or input); nullopt when the input's values are not known.
std::optional<std::vector<int64_t>> read_axes(const InferContext& ctx) {
  const Node& node = ctx.node();
  const int since = axes_input_since(node);
  if (ctx.opset() < since) {
    if (ctx.has_input(1)) fail_op(ctx, "axes is an attribute before opset " + std::to_string(since) + ", not an input");
    return node.attr_ints("axes");
  }
  if (node.has_attribute("axes"))
    fail_op(ctx, "axes is an input from opset " + std::to_string(since) + ", not an attribute");
  if (!ctx.has_input(1)) return std::vector<int64_t>{};
  if (ctx.input_dtype(1) != DType::Int64)
    fail_op(ctx, "axes must be int64, got " + std::string(dtype_name(ctx.input_dtype(1))));
  const Shape& s = ctx.input_shape(1);
  if (s.rank_known && s.rank() != 1) fail_op(ctx, "axes must be a 1-D tensor, got shape " + s.to_string());
  if (s.rank_known && is_static_value(s.dims[0], 0)) return std::vector<int64_t>{};  // empty even if not constant
  return ctx.input_ints(1);
}

bool noop_with_empty_axes(const InferContext& ctx) {
  return ctx.opset() >= axes_input_since(ctx.node()) && ctx.node().attr_int("noop_with_empty_axes", 0) != 0;
}

void infer_reduce(InferContext& ctx) {
  require_numeric(ctx, 0);
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  const bool noop = noop_with_empty_axes(ctx);
  const auto axes = read_axes(ctx);
  const Shape& x = ctx.input_shape(0);
  const DType dtype = ctx.input_dtype(0);
  if (!x.rank_known) return ctx.set_output(0, dtype, Shape::unknown_rank());
  if (!axes) {  // axes come from a tensor whose values inference does not know
    Shape out = x;
    if (keepdims) {
      for (Dim& d : out.dims) d = is_static_value(d, 1) ? d : Dim::unknown();
      return ctx.set_output(0, dtype, out);
    }
    const Shape& axes_shape = ctx.input_shape(1);
    if (!axes_shape.rank_known || axes_shape.rank() != 1 || !axes_shape.dims[0].is_static()) {
      return ctx.set_output(0, dtype, Shape::unknown_rank());
    }
    const int64_t count = axes_shape.dims[0].value();
    if (count == 0 && noop) return ctx.set_output(0, dtype, x);
    if (count > x.rank())
      fail_op(ctx, "reduces " + std::to_string(count) + " axes of an input of shape " + x.to_string());
    return ctx.set_output(0, dtype,
                          count == 0 ? Shape() : Shape(std::vector<Dim>(static_cast<size_t>(x.rank() - count))));
  }
  if (axes->empty() && noop) {
    ctx.set_output(0, dtype, x);
    if (auto known = ctx.input_known(0); known && is_integer(dtype)) ctx.set_output_known(0, *known);
    return;
  }
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), axes->empty());
  for (int64_t a : checked_axes(ctx, *axes, x.rank())) reduced[static_cast<size_t>(a)] = true;
  Shape out;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (!reduced[static_cast<size_t>(i)]) {
      out.dims.push_back(x.dims[i]);
    } else if (keepdims) {
      out.dims.emplace_back(1);
    }
  }
  ctx.set_output(0, dtype, out);
  auto combine = known_combiner(ctx.node().op_type);
  auto known = ctx.input_known(0);
  if (combine && known && !known->empty() && is_integer(dtype) && x.rank() == 1) {
    Dim total = (*known)[0];
    for (size_t i = 1; i < known->size(); ++i) total = combine(total, (*known)[i]);
    ctx.set_output_known(0, {total});
  }
}

void infer_arg_reduce(InferContext& ctx) {
  require_numeric(ctx, 0);
  const Node& node = ctx.node();
  const int64_t select_last_index = node.attr_int("select_last_index", 0);
  if (select_last_index != 0 && select_last_index != 1) {
    fail_op(ctx, "select_last_index must be 0 or 1, got " + std::to_string(select_last_index));
  }
  const Shape& x = ctx.input_shape(0);
  if (!x.rank_known) return ctx.set_output(0, DType::Int64, Shape::unknown_rank());
  const int64_t axis = checked_axis(ctx, node.attr_int("axis", 0), x.rank());
  Shape out = x;
  if (node.attr_int("keepdims", 1) != 0) {
    out.dims[axis] = 1;
  } else {
    out.dims.erase(out.dims.begin() + axis);
  }
  ctx.set_output(0, DType::Int64, out);
}

OpCost reduce_cost(const CostContext& ctx) {
  const std::string& op = ctx.node.op_type;
  const double factor = op == "ReduceL2" || op == "ReduceSumSquare" ? 2 : 1;
  const double n = factor * static_cast<double>(ctx.input_numel(0));
  return {n, n};
}

struct SumFold {
  template <typename T>
  static T init() {
    return T(0);
  }
  template <typename T>
  static T combine(T a, T b) {
    return a + b;
  }
};
struct ProdFold {
  template <typename T>
  static T init() {
    return T(1);
  }
  template <typename T>
  static T combine(T a, T b) {
    return a * b;
  }
};
struct MaxFold {
  template <typename T>
  static T init() {  // the value of an empty reduction, as ONNX defines it
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  }
  template <typename T>
  static T combine(T a, T b) {
    return std::max(a, b);
  }
};
struct MinFold {
  template <typename T>
  static T init() {
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
  }
  template <typename T>
  static T combine(T a, T b) {
    return std::min(a, b);
  }
};

template <typename Op>
std::vector<Tensor> fold_reduce(const FoldContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  const Node& node = ctx.node;
  const bool axes_as_input = node.opset >= axes_input_since(node);
  const std::vector<int64_t> axes =
      axes_as_input ? (ctx.has_input(1) ? ctx.input_ints(1) : std::vector<int64_t>{}) : node.attr_ints("axes");
  if (axes.empty() && axes_as_input && node.attr_int("noop_with_empty_axes", 0) != 0) return {x};
  const std::vector<int64_t>& sizes = x.sizes();
  std::vector<bool> reduced(sizes.size(), axes.empty());
  for (int64_t axis : axes) reduced[static_cast<size_t>(normalize_axis(axis, x.rank()).value())] = true;
  std::vector<int64_t> kept_sizes;  // reduced dims as 1
  for (size_t i = 0; i < sizes.size(); ++i) {
    kept_sizes.push_back(reduced[i] ? 1 : sizes[i]);
  }
  std::vector<int64_t> out_sizes;
  for (size_t i = 0; i < sizes.size(); ++i)
    if (!reduced[i] || node.attr_int("keepdims", 1) != 0) out_sizes.push_back(kept_sizes[i]);
  // The output element each input element folds into: kept_sizes broadcast back onto the input.
  const std::vector<int64_t> strides = broadcast_strides(kept_sizes, sizes.size());
  std::vector<Tensor> result;
  visit_fold_type(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::vector<T> values = elements_as<T>(x);
    int64_t out_numel = 1;
    for (int64_t s : kept_sizes) out_numel *= s;
    std::vector<T> out(static_cast<size_t>(out_numel), Op::template init<T>());
    for_each_strided(sizes, 0, strides, [&](int64_t n, int64_t target) {
      T& slot = out[static_cast<size_t>(target)];
      slot = Op::combine(slot, values[static_cast<size_t>(n)]);
    });
    result.push_back(tensor_from(x.dtype(), out_sizes, out));
  });
  return result;
}

OpSchema reduce_schema(const char* name, std::vector<Tensor> (*fold)(const FoldContext&) = nullptr) {
  return {.op_type = name,
          .min_inputs = 1,
          .max_inputs = 2,
          .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
          .infer = &infer_reduce,
          .cost = &reduce_cost,
          .fold = fold};
}

OpSchema arg_reduce_schema(const char* name) {
  return {.op_type = name,
          .input_kinds = {InputKind::Data},
          .infer = &infer_arg_reduce,
          .cost = &flops_per_input_element<1, 0>};
}

}  // namespace

void register_reduce_ops(OpRegistry& registry) {
  registry.add(reduce_schema("ReduceMean"));
  registry.add(reduce_schema("ReduceSum", &fold_reduce<SumFold>));
  registry.add(reduce_schema("ReduceMax", &fold_reduce<MaxFold>));
  registry.add(reduce_schema("ReduceMin", &fold_reduce<MinFold>));
  registry.add(reduce_schema("ReduceProd", &fold_reduce<ProdFold>));
  registry.add(reduce_schema("ReduceL2"));
  registry.add(reduce_schema("ReduceSumSquare"));
  registry.add(reduce_schema("ReduceL1"));
  registry.add(reduce_schema("ReduceLogSum"));
  registry.add(reduce_schema("ReduceLogSumExp"));
  registry.add(arg_reduce_schema("ArgMax"));
  registry.add(arg_reduce_schema("ArgMin"));
}

}  // namespace onnxtrain
