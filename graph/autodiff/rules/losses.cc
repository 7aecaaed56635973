// The losses, per element e with label l and k_e = dloss_e (reduction none), dloss (sum) or dloss / Σ w_l
// over the elements not ignored (mean), 0 for elements labelled ignore_index; class weights w get no
// gradient (non-differentiable inputs, as in PyTorch):
//  - SoftmaxCrossEntropyLoss: loss_e = -w_l log_softmax(s_e)_l, so ds_e = k_e w_l (softmax(s_e) - onehot(l)),
//    by ai.onnxtrain::SoftmaxCrossEntropyLossGrad from log_prob; a gradient of log_prob adds dlp - softmax Σ_c dlp.
//  - NegativeLogLikelihoodLoss: loss_e = -w_l x_el, so dx_e = -k_e w_l onehot(l), by NegativeLogLikelihoodLossGrad.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

namespace {

Attributes loss_attributes(const Node& node) {
  Attributes a{{"reduction", node.attr_string("reduction", "mean")}};
  if (node.has_attribute("ignore_index")) a["ignore_index"] = node.attr_int("ignore_index", 0);
  return a;
}

}  // namespace

void softmax_cross_entropy_loss_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId log_prob = ctx.require_output(1);
  ValueId dloss = ctx.output_grad(0);
  if (dloss.valid()) {
    std::vector<ValueId> inputs = {dloss, log_prob, ctx.input(1)};
    if (ctx.has_input(2)) inputs.push_back(ctx.input(2));
    ctx.add_input_grad(0, ctx.emit_training("SoftmaxCrossEntropyLossGrad", inputs, loss_attributes(ctx.node())));
  }
  ValueId dlog_prob = ctx.output_grad(1);
  if (dlog_prob.valid()) {  // log_softmax's backward over the class axis 1
    ValueId total = ctx.emit("ReduceSum", {dlog_prob, ctx.int64s({1})}, {{"keepdims", int64_t{1}}});
    ValueId spread = ctx.emit("Mul", {ctx.emit("Exp", {log_prob}), total});
    ctx.add_input_grad(0, ctx.emit("Sub", {dlog_prob, spread}));
  }
}

void negative_log_likelihood_loss_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  std::vector<ValueId> inputs = {ctx.output_grad(0), ctx.input(1), ctx.shape_of(ctx.input(0))};
  if (ctx.has_input(2)) inputs.push_back(ctx.input(2));
  ctx.add_input_grad(0, ctx.emit_training("NegativeLogLikelihoodLossGrad", inputs, loss_attributes(ctx.node())));
}

}  // namespace onnxtrain::gradient_rules
