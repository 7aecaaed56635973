// Min, Max, Sum, Mean: one or more inputs of one type, broadcast together (numpy rules).
// Cost: (inputs − 1) FLOPs per output element forward (at least 1), one per input element backward.
#include <algorithm>

#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

struct MinOp {
  static constexpr const char* name = "Min";
  static constexpr bool floats_only = false;
  static Dim dims(const Dim& a, const Dim& b) { return dim_min(a, b); }
  template <typename T>
  static T combine(T a, T b) {
    return std::min(a, b);
  }
  template <typename T>
  static T finish(T v, size_t) {
    return v;
  }
};

struct MaxOp {
  static constexpr const char* name = "Max";
  static constexpr bool floats_only = false;
  static Dim dims(const Dim& a, const Dim& b) { return dim_max(a, b); }
  template <typename T>
  static T combine(T a, T b) {
    return std::max(a, b);
  }
  template <typename T>
  static T finish(T v, size_t) {
    return v;
  }
};

struct SumOp {
  static constexpr const char* name = "Sum";
  static constexpr bool floats_only = true;
  static Dim dims(const Dim& a, const Dim& b) { return a + b; }
  template <typename T>
  static T combine(T a, T b) {
    return a + b;
  }
  template <typename T>
  static T finish(T v, size_t) {
    return v;
  }
};

struct MeanOp {
  static constexpr const char* name = "Mean";
  static constexpr bool floats_only = true;
  static Dim dims(const Dim&, const Dim&) { return Dim::unknown(); }
  template <typename T>
  static T combine(T a, T b) {
    return a + b;
  }
  template <typename T>
  static T finish(T v, size_t count) {
    return v / static_cast<T>(count);
  }
};

std::vector<size_t> present_inputs(const InferContext& ctx) {
  std::vector<size_t> present;
  for (size_t i = 0; i < ctx.input_count(); ++i)
    if (ctx.has_input(i)) present.push_back(i);
  return present;
}

template <typename Op>
void infer_variadic(InferContext& ctx) {
  const std::vector<size_t> inputs = present_inputs(ctx);
  if (inputs.empty() || inputs[0] != 0) fail_op(ctx, "input 0 is required");
  Shape out = ctx.input_shape(0);
  for (size_t i : inputs) {
    if (Op::floats_only) {
      require_floating(ctx, i);
    } else {
      require_numeric(ctx, i);
    }
    require_same_dtype(ctx, i, 0);
    out = broadcast_or_fail(ctx, out, ctx.input_shape(i));
  }
  auto known = combine_known(ctx, out, inputs, &Op::dims);
  ctx.set_output(0, ctx.input_dtype(0), out);
  if (known) ctx.set_output_known(0, std::move(*known));
}

OpCost variadic_cost(const CostContext& ctx) {
  double forward = 0, backward = 0;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) backward += static_cast<double>(ctx.input_numel(i));
  const double inputs = static_cast<double>(ctx.inputs.size());
  forward = std::max(1.0, inputs - 1) * static_cast<double>(ctx.output_numel(0));
  return {forward, backward};
}

template <typename Op>
std::vector<Tensor> fold_variadic(const FoldContext& ctx) {
  const std::vector<Tensor> inputs = broadcast_inputs(ctx);  // the present ones, at the output sizes
  std::vector<Tensor> result;
  visit_fold_type(inputs[0].dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> out = elements_as<T>(inputs[0]);
    for (size_t k = 1; k < inputs.size(); ++k) {
      const auto values = elements_as<T>(inputs[k]);
      for (size_t i = 0; i < out.size(); ++i) out[i] = Op::combine(out[i], values[i]);
    }
    for (T& v : out) v = Op::template finish<T>(v, inputs.size());
    result.push_back(tensor_from(inputs[0].dtype(), inputs[0].sizes(), out));
  });
  return result;
}

template <typename Op>
OpSchema variadic_schema() {
  return {.op_type = Op::name,
          .min_inputs = 1,
          .max_inputs = -1,
          .input_kinds = {InputKind::Data},
          .infer = &infer_variadic<Op>,
          .cost = &variadic_cost,
          .fold = &fold_variadic<Op>};
}

}  // namespace

void register_variadic_ops(OpRegistry& registry) {
  registry.add(variadic_schema<MinOp>());
  registry.add(variadic_schema<MaxOp>());
  registry.add(variadic_schema<SumOp>());
  registry.add(variadic_schema<MeanOp>());
}

}  // namespace onnxtrain
