// TapMajorConv (Conv with its weight in tap-major layout, graph/ops/training/tap_major_conv.cc): one
// TapMajorConvGrad node gives dX, dWt (in Wt's layout) and dB, only those needed. The node's pads are
// explicit already (graph/autodiff/tap_major_conv_weights.h writes them).
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void tap_major_conv_gradient(GradientContext& ctx) {
  const bool dx = ctx.needs_grad(0), dw = ctx.needs_grad(1), db = ctx.needs_grad(2);
  if (!dx && !dw && !db) return;
  std::vector<ValueId> grads = ctx.emit("TapMajorConvGrad", {ctx.output_grad(0), ctx.input(0), ctx.input(1)},
                                        ctx.node().attributes, {dx, dw, db}, kTrainingDomain);
  if (dx) ctx.add_input_grad(0, grads[0]);
  if (dw) ctx.add_input_grad(1, grads[1]);
  if (db) ctx.add_input_grad(2, grads[2]);
}

}  // namespace onnxtrain::gradient_rules
