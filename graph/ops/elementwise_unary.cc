// Activations and unary math (Relu … Gelu), Clip and PRelu: the output has the input's type and shape
// (PRelu's slope broadcasts onto the input). Cost: 1 FLOP per element forward, 1–2 backward.
#include <cmath>
#include <type_traits>

#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

void infer_float_unary(InferContext& ctx) {
  require_floating(ctx, 0);
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
}

void infer_numeric_unary(InferContext& ctx) {
  require_numeric(ctx, 0);
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
}

void infer_gelu(InferContext& ctx) {
  const std::string approximate = ctx.node().attr_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh") {
    fail_op(ctx, "approximate must be 'none' or 'tanh', got '" + approximate + "'");
  }
  infer_float_unary(ctx);
}

// Clip: min/max are attributes before opset 11, optional scalar inputs from 11.
void infer_clip(InferContext& ctx) {
  require_numeric(ctx, 0);
  if (ctx.opset() < 11) {
    if (ctx.has_input(1) || ctx.has_input(2)) fail_op(ctx, "min and max are attributes before opset 11, not inputs");
    if (ctx.node().attr_float("min", -INFINITY) > ctx.node().attr_float("max", INFINITY)) {
      fail_op(ctx, "min is greater than max");
    }
  }
  for (size_t i : {size_t{1}, size_t{2}}) {
    if (!ctx.has_input(i)) continue;
    require_same_dtype(ctx, i, 0);
    require_scalar(ctx, i, i == 1 ? "min" : "max");
  }
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
}

// PRelu: the slope broadcasts unidirectionally onto X (a per-channel slope of NCHW input is (C,1,1)).
void infer_prelu(InferContext& ctx) {
  require_numeric(ctx, 0);
  require_same_dtype(ctx, 1, 0);
  const Shape& x = ctx.input_shape(0);
  const Shape& slope = ctx.input_shape(1);
  auto out = broadcast_shapes(x, slope);
  auto onto_x = [&] {
    if (!out || out->rank() != x.rank()) return false;
    for (int64_t i = 0; i < x.rank(); ++i)
      if (x.dims[i].is_static() && out->dims[i] != x.dims[i]) return false;
    return true;
  };
  if (x.rank_known && slope.rank_known && !onto_x()) {
    std::string hint;
    if (slope.rank() == 1 && x.rank() > 2) {
      std::string ones;
      for (int64_t i = 2; i < x.rank(); ++i) ones += ",1";
      hint = "; a per-channel slope needs shape (" + x.dims[1].to_string() + ones + ")";
    }
    fail_op(ctx, "slope of shape " + slope.to_string() + " does not broadcast to the input " + x.to_string() + hint);
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
}

constexpr auto cheap_backward_cost = &flops_per_output_element<1, 1>;
constexpr auto elementwise_cost = &flops_per_output_element<1, 2>;

struct SqrtOp {
  static constexpr bool floats_only = true;
  template <typename T>
  static T apply(T x) {
    return std::sqrt(x);
  }
};
struct ExpOp {
  static constexpr bool floats_only = true;
  template <typename T>
  static T apply(T x) {
    return std::exp(x);
  }
};
struct LogOp {
  static constexpr bool floats_only = true;
  template <typename T>
  static T apply(T x) {
    return std::log(x);
  }
};
struct ReciprocalOp {
  static constexpr bool floats_only = true;
  template <typename T>
  static T apply(T x) {
    return T(1) / x;
  }
};
struct SinOp {
  static constexpr bool floats_only = true;
  template <typename T>
  static T apply(T x) {
    return std::sin(x);
  }
};
struct CosOp {
  static constexpr bool floats_only = true;
  template <typename T>
  static T apply(T x) {
    return std::cos(x);
  }
};
struct CeilOp {
  static constexpr bool floats_only = true;
  template <typename T>
  static T apply(T x) {
    return std::ceil(x);
  }
};
struct FloorOp {
  static constexpr bool floats_only = true;
  template <typename T>
  static T apply(T x) {
    return std::floor(x);
  }
};
struct NegOp {
  static constexpr bool floats_only = false;
  template <typename T>
  static T apply(T x) {
    return T(-x);
  }
};
struct AbsOp {
  static constexpr bool floats_only = false;
  template <typename T>
  static T apply(T x) {
    if constexpr (std::is_unsigned_v<T>) {
      return x;
    } else {
      return x < 0 ? T(-x) : x;
    }
  }
};

struct SignOp {
  static constexpr bool floats_only = false;
  template <typename T>
  static T apply(T x) {
    if constexpr (std::is_unsigned_v<T>) {
      return x > T(0) ? T(1) : T(0);
    } else {
      return x > T(0) ? T(1) : x < T(0) ? T(-1) : x == T(0) ? T(0) : x;
    }
  }
};

template <typename Op>
std::vector<Tensor> fold_unary(const FoldContext& ctx) {
  const Tensor& x = ctx.inputs[0];
  if (Op::floats_only && !is_floating(x.dtype())) return {};
  std::vector<Tensor> result;
  visit_fold_type(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> values = elements_as<T>(x);
    for (T& v : values) v = Op::apply(v);
    result.push_back(tensor_from(x.dtype(), x.sizes(), values));
  });
  return result;
}

OpSchema unary(const char* name, void (*infer)(InferContext&), OpCost (*cost)(const CostContext&),
               std::vector<Tensor> (*fold)(const FoldContext&) = nullptr) {
  return {.op_type = name,
          .min_inputs = 1,
          .max_inputs = 1,
          .input_kinds = {InputKind::Data},
          .infer = infer,
          .cost = cost,
          .fold = fold};
}

}  // namespace

void register_elementwise_unary_ops(OpRegistry& registry) {
  registry.add(unary("Relu", &infer_numeric_unary, cheap_backward_cost));
  registry.add(unary("Sigmoid", &infer_float_unary, elementwise_cost));
  registry.add(unary("Tanh", &infer_float_unary, elementwise_cost));
  registry.add(unary("Erf", &infer_numeric_unary, elementwise_cost));
  registry.add(unary("Sqrt", &infer_float_unary, elementwise_cost, &fold_unary<SqrtOp>));
  registry.add(unary("Exp", &infer_float_unary, cheap_backward_cost, &fold_unary<ExpOp>));
  registry.add(unary("Log", &infer_float_unary, cheap_backward_cost, &fold_unary<LogOp>));
  // Rotary position embeddings (Llama) take Sin and Cos of positions times frequencies.
  registry.add(unary("Sin", &infer_float_unary, elementwise_cost, &fold_unary<SinOp>));
  registry.add(unary("Cos", &infer_float_unary, elementwise_cost, &fold_unary<CosOp>));
  registry.add(unary("Ceil", &infer_float_unary, cheap_backward_cost, &fold_unary<CeilOp>));
  registry.add(unary("Floor", &infer_float_unary, cheap_backward_cost, &fold_unary<FloorOp>));
  registry.add(unary("Neg", &infer_numeric_unary, cheap_backward_cost, &fold_unary<NegOp>));
  registry.add(unary("Abs", &infer_numeric_unary, cheap_backward_cost, &fold_unary<AbsOp>));
  // DeBERTa's relative positions take the Sign of int64 distances.
  registry.add(unary("Sign", &infer_numeric_unary, cheap_backward_cost, &fold_unary<SignOp>));
  registry.add(unary("Reciprocal", &infer_float_unary, elementwise_cost, &fold_unary<ReciprocalOp>));
  registry.add(unary("Softplus", &infer_float_unary, elementwise_cost));
  registry.add(unary("LeakyRelu", &infer_float_unary, cheap_backward_cost));
  registry.add(unary("Elu", &infer_float_unary, elementwise_cost));
  registry.add(unary("Celu", &infer_float_unary, elementwise_cost));
  registry.add(unary("Mish", &infer_float_unary, elementwise_cost));
  registry.add(unary("Selu", &infer_float_unary, elementwise_cost));
  registry.add(unary("HardSigmoid", &infer_float_unary, elementwise_cost));
  registry.add(unary("HardSwish", &infer_float_unary, elementwise_cost));
  registry.add(unary("Gelu", &infer_gelu, elementwise_cost));

  OpSchema clip = unary("Clip", &infer_clip, cheap_backward_cost);
  clip.max_inputs = 3;
  clip.input_kinds = {InputKind::Data, InputKind::NonDifferentiable, InputKind::NonDifferentiable};
  registry.add(std::move(clip));

  OpSchema prelu = unary("PRelu", &infer_prelu, elementwise_cost);
  prelu.min_inputs = prelu.max_inputs = 2;
  prelu.input_kinds = {InputKind::Data, InputKind::Weight};
  registry.add(std::move(prelu));
}

}  // namespace onnxtrain
