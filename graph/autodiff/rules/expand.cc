// Expand: y = x broadcast (numpy rules) to a shape, so dx = dy summed over the broadcast axes.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void expand_gradient(GradientContext& ctx) { ctx.add_broadcast_input_grad(0, ctx.output_grad(0)); }

}  // namespace onnxtrain::gradient_rules
