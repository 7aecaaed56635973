// RNN, GRU and LSTM: one RecurrentGrad node (graph/ops/training/recurrent_grad.cc) gives the gradients of
// X, W, R, B, initial_h, initial_c and P that the loss needs, from the gradients reaching Y, Y_h and Y_c
// (each may be absent: the loss reads only the last state, or only the sequence). The forward keeps what the
// backward reads of each step in its reserve (output 3, as cuDNN's reserve space and PyTorch's LSTM do):
// recomputing it instead cost a third more products, an LSTM at 0.66 of PyTorch's speed (README).
#include "graph/autodiff/rules/rules.h"
#include "graph/recurrent_cell.h"

namespace onnxtrain::gradient_rules {

void recurrent_gradient(GradientContext& ctx) {
  std::vector<ValueId> inputs(12);
  for (size_t i = 0; i < 8 && i < ctx.node().inputs.size(); ++i) {
    if (ctx.has_input(i)) inputs[i] = ctx.input(i);
  }
  bool any_output_grad = false;
  for (size_t o = 0; o < 3; ++o) {
    inputs[8 + o] = ctx.output_grad(o);
    any_output_grad = any_output_grad || inputs[8 + o].valid();
  }
  if (!any_output_grad) return;
  std::vector<bool> wanted;
  for (size_t input : kRecurrentGradientOf) wanted.push_back(ctx.needs_grad(input));
  while (!wanted.empty() && !wanted.back()) wanted.pop_back();
  if (wanted.empty()) return;
  Attributes attrs = ctx.node().attributes;
  attrs["cell"] = ctx.node().op_type;
  inputs[11] = ctx.require_output(3);
  const std::vector<ValueId> grads = ctx.emit("RecurrentGrad", inputs, attrs, wanted, kTrainingDomain);
  for (size_t k = 0; k < grads.size(); ++k) {
    if (grads[k].valid()) ctx.add_input_grad(kRecurrentGradientOf[k], grads[k]);
  }
}

}  // namespace onnxtrain::gradient_rules
