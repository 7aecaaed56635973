// Identity: y = x, so dx = dy.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void identity_gradient(GradientContext& ctx) { ctx.add_input_grad(0, ctx.output_grad(0)); }

}  // namespace onnxtrain::gradient_rules
