// Activations and unary math (Relu, LeakyRelu, Elu, Selu, Sigmoid, Tanh, Gelu, Erf, Softplus, HardSigmoid,
// HardSwish, Abs, Sqrt, Exp, Log, Reciprocal, Sin, Cos, Ceil): dx = ActivationGrad(dy, x) = dy * f'(x), one fused
// backward op whose per-op f' (PyTorch's at the kinks: Relu'(0) = 0) is in kernels/elementwise_derivatives.h.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void activation_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  Attributes attributes = {{"activation", ctx.node().op_type}};
  for (const char* name : {"alpha", "beta", "gamma", "approximate"}) {  // the parameters f' reads
    auto it = ctx.node().attributes.find(name);
    if (it != ctx.node().attributes.end()) attributes[name] = it->second;
  }
  ctx.add_input_grad(0, ctx.emit_training("ActivationGrad", {ctx.output_grad(0), ctx.input(0)}, attributes));
}

}  // namespace onnxtrain::gradient_rules
