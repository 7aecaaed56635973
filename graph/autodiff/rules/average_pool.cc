// AveragePool: each dY element is spread evenly over the elements its window averaged (count_include_pad
// decides the divisor as in the forward): dX = AveragePoolGrad(dY, shape(X)) with AveragePool's attributes.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void average_pool_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId dx =
      ctx.emit_training("AveragePoolGrad", {ctx.output_grad(0), ctx.shape_of(ctx.input(0))}, ctx.node().attributes);
  ctx.add_input_grad(0, dx);
}

}  // namespace onnxtrain::gradient_rules
