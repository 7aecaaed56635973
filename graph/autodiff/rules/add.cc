// Add: y = a + b (numpy broadcasting). da = dy and db = dy, each summed down to its input's shape.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void add_gradient(GradientContext& ctx) {
  ValueId dy = ctx.output_grad(0);
  ctx.add_broadcast_input_grad(0, dy);
  ctx.add_broadcast_input_grad(1, dy);
}

}  // namespace onnxtrain::gradient_rules
