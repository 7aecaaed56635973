// LRN: with s_c = bias + alpha/size · Σ_{j∈W(c)} x_j² and y_c = x_c · s_c^-β,
// dx_j = dy_j · s_j^-β − 2β·alpha/size · x_j · Σ_{c: j∈W(c)} dy_c · x_c · s_c^(-β-1).
// Fused into LRNGrad(dY, X) with LRN's attributes.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void lrn_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ctx.add_input_grad(0, ctx.emit_training("LRNGrad", {ctx.output_grad(0), ctx.input(0)}, ctx.node().attributes));
}

}  // namespace onnxtrain::gradient_rules
