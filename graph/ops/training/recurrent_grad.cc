// ai.onnxtrain::RecurrentGrad(X, W, R, B, sequence_lens, initial_h, initial_c, P, dY, dY_h, dY_c, reserve)
//   → dX, dW, dR, dB, d_initial_h, d_initial_c, dP (each optional)
// The backward of RNN, GRU and LSTM (attribute `cell`: the forward op type; the forward node's own
// attributes beside it). Inputs 0-7 are the forward node's, omitted where it omitted them; the output
// gradients 8-10 are omitted where the loss does not read that output. Output k is the gradient of input
// k (k < 4) or k + 1 (the states and P), shaped like it. `reserve` is the forward's output 3
// (graph/recurrent_cell.h): what the backward through time reads of every step.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/recurrent_cell.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

void infer_recurrent_grad(InferContext& ctx) {
  RecurrentCell cell;
  const std::string op = ctx.node().attr_string("cell", "");
  if (std::string refused = read_recurrent_cell(op, ctx.node().attributes, cell); !refused.empty())
    fail_op(ctx, refused);
  if (!ctx.has_input(11)) fail_op(ctx, "input 11, the forward's reserve, is required");
  for (size_t k = 0; k < ctx.output_count() && k < std::size(kRecurrentGradientOf); ++k) {
    if (!ctx.has_output(k)) continue;
    if (!ctx.has_input(kRecurrentGradientOf[k]))
      fail_op(ctx, "output " + std::to_string(k) + " is the gradient of an omitted input");
    ctx.set_output(k, ctx.input_dtype(0), ctx.input_shape(kRecurrentGradientOf[k]));
  }
}

// The forward's products twice: dX and dH, then dW and dR.
OpCost recurrent_grad_cost(const CostContext& ctx) {
  RecurrentCell cell;
  if (!read_recurrent_cell(ctx.node.attr_string("cell", ""), ctx.node.attributes, cell).empty()) return {};
  const Shape &w = ctx.inputs[1], &r = ctx.inputs[2];
  if (!w.rank_known || !r.rank_known || w.rank() != 3 || r.rank() != 3) return {};
  const std::optional<int64_t> gated = w.dims[1].evaluate({}), input = w.dims[2].evaluate({});
  const std::optional<int64_t> hidden = r.dims[2].evaluate({}), directions = w.dims[0].evaluate({});
  const int64_t x = ctx.input_numel(0);  // T·N·I
  if (!gated || !input || !hidden || !directions || *input < 1 || x == 0) return {};
  const double gate_elements = static_cast<double>(x / *input) * static_cast<double>(*directions * *gated);
  return {2 * 2 * gate_elements * static_cast<double>(*input + *hidden) + 16 * gate_elements, 0,
          recurrent_serial_steps(cell, ctx.inputs[0])};
}

}  // namespace

void register_recurrent_grad_op(OpRegistry& registry) {
  registry.add({.op_type = "RecurrentGrad",
                .domain = kTrainingDomain,
                .min_inputs = 3,
                .max_inputs = 12,
                .min_outputs = 1,
                .max_outputs = 7,
                .input_kinds = {InputKind::Data, InputKind::Weight, InputKind::Weight, InputKind::Weight,
                                InputKind::NonDifferentiable, InputKind::Data, InputKind::Data, InputKind::Weight,
                                InputKind::Data, InputKind::Data, InputKind::Data, InputKind::NonDifferentiable},
                .infer = &infer_recurrent_grad,
                .cost = &recurrent_grad_cost});
}

}  // namespace onnxtrain
