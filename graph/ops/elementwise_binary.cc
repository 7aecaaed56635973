// Add, Sub, Mul, Div, Pow: numpy broadcasting, shape arithmetic on known int values, constant folding.
// Cost: 1 FLOP per output element forward; backward 1 (Add, Sub) or 2 (Mul, Div, Pow) per element.
#include <cmath>
#include <string_view>
#include <type_traits>

#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

struct AddOp {
  static constexpr const char* name = "Add";
  static constexpr int backward_per_element = 1;
  static Dim dims(const Dim& a, const Dim& b) { return a + b; }
  template <typename T>
  static T apply(const FoldContext&, T a, T b) {
    return a + b;
  }
};

struct SubOp {
  static constexpr const char* name = "Sub";
  static constexpr int backward_per_element = 1;
  static Dim dims(const Dim& a, const Dim& b) { return a - b; }
  template <typename T>
  static T apply(const FoldContext&, T a, T b) {
    return a - b;
  }
};

struct MulOp {
  static constexpr const char* name = "Mul";
  static constexpr int backward_per_element = 2;
  static Dim dims(const Dim& a, const Dim& b) { return a * b; }
  template <typename T>
  static T apply(const FoldContext&, T a, T b) {
    return a * b;
  }
};

struct DivOp {
  static constexpr const char* name = "Div";
  static constexpr int backward_per_element = 2;
  static Dim dims(const Dim& a, const Dim& b) { return dim_div(a, b); }
  template <typename T>
  static T apply(const FoldContext& ctx, T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) fail_fold(ctx, "integer division by zero");
    }
    return a / b;  // integers truncate toward zero, as ONNX Runtime does
  }
};

struct PowOp {
  static constexpr const char* name = "Pow";
  static constexpr int backward_per_element = 2;
  static Dim dims(const Dim& a, const Dim& b) { return dim_pow(a, b); }
  template <typename T>
  static T apply(const FoldContext&, T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(std::pow(static_cast<double>(a), static_cast<double>(b)));
    } else {
      return std::pow(a, b);
    }
  }
};

template <typename Op>
void infer_binary(InferContext& ctx) {
  require_numeric(ctx, 0);
  require_numeric(ctx, 1);
  // Pow's exponent may have its own type from opset 12; every other pairing must match.
  const bool mixed_ok = std::string_view(Op::name) == "Pow" && ctx.opset() >= 12;
  if (!mixed_ok) require_same_dtype(ctx, 1, 0);
  Shape out = broadcast_or_fail(ctx, ctx.input_shape(0), ctx.input_shape(1));
  auto known = combine_known(ctx, out, {0, 1}, &Op::dims);
  ctx.set_output(0, ctx.input_dtype(0), out);
  if (known) ctx.set_output_known(0, std::move(*known));
}

template <typename Op>
std::vector<Tensor> fold_binary(const FoldContext& ctx) {
  // float16/bfloat16 math is not folded: the evaluator declines and the node stays in the graph.
  for (const Tensor& t : ctx.inputs)
    if (t.dtype() == DType::Float16 || t.dtype() == DType::BFloat16) return {};
  const std::vector<Tensor> in = broadcast_inputs(ctx);  // both at the output sizes
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  std::vector<Tensor> result;
  visit_fold_type(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const auto va = elements_as<T>(a);
    std::vector<T> out(va.size());
    if (std::is_integral_v<T> && is_floating(b.dtype())) {  // only Pow mixes types: an int base, a float exponent
      const auto vb = b.to_double();
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(std::pow(static_cast<double>(va[i]), vb[i]));
    } else {
      const auto vb = elements_as<T>(b);
      for (size_t i = 0; i < out.size(); ++i) out[i] = Op::apply(ctx, va[i], vb[i]);
    }
    result.push_back(tensor_from(a.dtype(), a.sizes(), out));
  });
  return result;
}

template <typename Op>
OpSchema binary_schema() {
  return {.op_type = Op::name,
          .min_inputs = 2,
          .max_inputs = 2,
          .input_kinds = {InputKind::Data, InputKind::Data},
          .infer = &infer_binary<Op>,
          .cost = &flops_per_output_element<1, Op::backward_per_element>,
          .fold = &fold_binary<Op>};
}

}  // namespace

void register_elementwise_binary_ops(OpRegistry& registry) {
  registry.add(binary_schema<AddOp>());
  registry.add(binary_schema<SubOp>());
  registry.add(binary_schema<MulOp>());
  registry.add(binary_schema<DivOp>());
  registry.add(binary_schema<PowOp>());
}

}  // namespace onnxtrain
