// Activations and unary math (Relu, LeakyRelu, Elu, Selu, Sigmoid, Tanh, Gelu, Erf, Softplus, HardSigmoid,
// HardSwish, Abs, Sqrt, Exp, Log, Reciprocal, Sin, Cos, Ceil): dx = ActivationGrad(dy, x) = dy * f'(x), one fused
// backward op whose per-op f' (PyTorch's at the kinks: Relu'(0) = 0) is in kernels/elementwise_derivatives.h.
// Relu's reads y = Relu(x) in place of x: the same f', as PyTorch's threshold_backward does.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void activation_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  Attributes attributes = {{"activation", ctx.node().op_type}};
  for (const char* name : {"alpha", "beta", "gamma", "approximate"}) {  // the parameters f' reads
    auto it = ctx.node().attributes.find(name);
    if (it != ctx.node().attributes.end()) attributes[name] = it->second;
  }
  // Relu'(x) = [x > 0] = [Relu(x) > 0]: reading the output instead, which the next layer's backward keeps
  // anyway (a Conv's weight gradient reads its input), lets the input go at the end of the forward pass:
  // a BatchNormalization's output under Conv→BN→Relu, 0.6 GB of a torchvision ResNet-50 step at batch 16.
  const ValueId at = ctx.node().op_type == "Relu" ? ctx.output(0) : ctx.input(0);
  ctx.add_input_grad(0, ctx.emit_training("ActivationGrad", {ctx.output_grad(0), at}, attributes));
}

}  // namespace onnxtrain::gradient_rules
