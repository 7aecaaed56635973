// ReduceSum: every input element contributes once to its output element, so dx = dy broadcast back.
#include "graph/autodiff/rules/reduce_common.h"
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void reduce_sum_gradient(GradientContext& ctx) { ctx.add_input_grad(0, broadcast_to_input(ctx, ctx.output_grad(0))); }

}  // namespace onnxtrain::gradient_rules
