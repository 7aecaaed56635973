// GatherND: each index row of y reads one slice of x, so dx is zeros shaped like x with every dy slice
// added into the slice it was read from: GatherNDGrad(dy, shape(x), indices) (repeated rows accumulate,
// negative coordinates count from the end; graph/ops/training/gather_nd_grad.cc says why this is not a
// ScatterND). The indices are not differentiated.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void gather_nd_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId dx = ctx.emit_training("GatherNDGrad", {ctx.output_grad(0), ctx.shape_of(ctx.input(0)), ctx.input(1)},
                                 {{"batch_dims", ctx.node().attr_int("batch_dims", 0)}});
  ctx.add_input_grad(0, dx);
}

}  // namespace onnxtrain::gradient_rules
