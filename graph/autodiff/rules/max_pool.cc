// MaxPool: each dY element flows to the first maximal X element of its window (PyTorch's and oneDNN's
// choice on ties): dX = MaxPoolGrad(dY, X) with MaxPool's attributes. Indices (int64) has no gradient.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void max_pool_gradient(GradientContext& ctx) {
  ValueId dy = ctx.output_grad(0);
  if (!dy.valid() || !ctx.needs_grad(0)) return;
  ctx.add_input_grad(0, ctx.emit_training("MaxPoolGrad", {dy, ctx.input(0)}, ctx.node().attributes));
}

}  // namespace onnxtrain::gradient_rules
