// ai.onnxtrain::ActivationGrad(dY, X[, dY2]) -> dX = (dY + dY2) * f'(X): the backward op of the activations and unary
// math ops. `activation` names the forward op; the forward node's alpha, beta, gamma and approximate
// ride along (absent ones take the forward op's defaults). Clip's constant bounds come as alpha (min) and
// beta (max), infinite where absent. dX has X's type and shape. dY2, a second part of the gradient (dY's
// type and shape), is added in the same pass (graph/autodiff/rules/add.cc under a fused Relu).
// Cost: ~4 FLOPs per element (a transcendental counted as one).
#include <array>
#include <string>

#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

// The forward ops the kernels differentiate (kernels/elementwise_derivatives.h has the math).
constexpr std::array<const char*, 24> kActivations = {
    "Relu",     "LeakyRelu",   "Elu",       "Selu",  "Sigmoid", "Tanh", "Gelu", "Erf",
    "Softplus", "HardSigmoid", "HardSwish", "Abs",   "Sqrt",    "Exp",  "Log",  "Reciprocal",
    "Sin",      "Cos",         "Ceil",      "Floor", "Clip",    "Sign", "Mish", "Celu"};

void infer_activation_grad(InferContext& ctx) {
  const std::string activation = ctx.node().attr_string("activation", "");
  bool known = false;
  for (const char* name : kActivations) known = known || activation == name;
  if (!known) fail_op(ctx, "activation '" + activation + "' is not one ActivationGrad differentiates");
  const std::string approximate = ctx.node().attr_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh") {
    fail_op(ctx, "approximate must be 'none' or 'tanh', got '" + approximate + "'");
  }
  require_floating(ctx, 1);
  require_same_dtype(ctx, 0, 1);
  const Shape& dy = ctx.input_shape(0);
  const Shape& x = ctx.input_shape(1);
  if (dy.rank_known && x.rank_known && dy.is_static() && x.is_static() && dy.static_sizes() != x.static_sizes()) {
    fail_op(ctx, "dY of shape " + dy.to_string() + " does not match X of shape " + x.to_string());
  }
  if (ctx.has_input(2)) {
    require_same_dtype(ctx, 2, 0);
    const Shape& dy2 = ctx.input_shape(2);
    if (dy.rank_known && dy2.rank_known && dy.is_static() && dy2.is_static() && dy.static_sizes() != dy2.static_sizes())
      fail_op(ctx, "dY2 of shape " + dy2.to_string() + " does not match dY of shape " + dy.to_string());
  }
  ctx.set_output(0, ctx.input_dtype(1), x);
}

}  // namespace

void register_activation_grad_op(OpRegistry& registry) {
  registry.add({.op_type = "ActivationGrad",
                .domain = kTrainingDomain,
                .min_inputs = 2,
                .max_inputs = 3,
                .input_kinds = {InputKind::Data, InputKind::Data, InputKind::Data},
                .infer = &infer_activation_grad,
                .cost = &flops_per_output_element<4, 0>});
}

}  // namespace onnxtrain
