// RNN, GRU and LSTM (opsets 7 and 14; graph/recurrent_cell.h has their inputs, outputs and what is
// refused). Shape inference checks every given input's shape against X's and hidden_size and sets Y, Y_h
// (and LSTM's Y_c), and the reserve (output 3) that the gradient rule adds in training graphs. Cost: the
// two products of each gate per step, 2·T·N·D·G·H·(I + H) FLOPs, and about 6 elementwise FLOPs per gate
// element; the backward (RecurrentGrad, from the reserve) twice the products: dX and dH, dW and dR.
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/recurrent_cell.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

constexpr size_t kW = 1, kR = 2, kB = 3, kSequenceLens = 4, kInitialH = 5, kInitialC = 6, kPeepholes = 7;

// A given input's shape must match `expected` wherever both dims are static.
void check_shape(const InferContext& ctx, size_t input, const char* name, const std::vector<Dim>& expected) {
  if (!ctx.has_input(input)) return;
  const Shape& s = ctx.input_shape(input);
  if (!s.rank_known) return;
  bool fits = s.rank() == static_cast<int64_t>(expected.size());
  for (size_t i = 0; fits && i < expected.size(); ++i) {
    fits = !(s.dims[i].is_static() && expected[i].is_static() && s.dims[i].value() != expected[i].value());
  }
  if (!fits) fail_op(ctx, std::string(name) + " " + s.to_string() + " must be " + dims_to_string(expected));
}

Dim dim_of(const Shape& s, int64_t i) { return s.rank_known && s.rank() > i ? s.dims[i] : Dim::unknown(); }

void infer_recurrent(InferContext& ctx) {
  RecurrentCell cell;
  if (std::string refused = read_recurrent_cell(ctx.node().op_type, ctx.node().attributes, cell); !refused.empty()) {
    fail_op(ctx, refused);
  }
  require_floating(ctx, 0);
  for (size_t i : {kW, kR, kB, kInitialH, kInitialC, kPeepholes}) {
    if (ctx.has_input(i)) require_same_dtype(ctx, i, 0);
  }
  if (ctx.has_input(kSequenceLens) && ctx.input_dtype(kSequenceLens) != DType::Int32 &&
      ctx.input_dtype(kSequenceLens) != DType::Int64) {
    fail_op(ctx, "sequence_lens must be int32, got " + std::string(dtype_name(ctx.input_dtype(kSequenceLens))));
  }
  const Shape& x = ctx.input_shape(0);
  if (x.rank_known && x.rank() != 3) fail_op(ctx, "X must have rank 3 (sequence, batch, input), got " + x.to_string());
  const Dim steps = dim_of(x, cell.layout == 0 ? 0 : 1), batch = dim_of(x, cell.layout == 0 ? 1 : 0);
  const Dim input = dim_of(x, 2);
  const Dim hidden = cell.hidden > 0 ? Dim(cell.hidden) : dim_of(ctx.input_shape(kR), 2);
  const Dim directions(cell.directions), gated = Dim(cell.gates()) * hidden;
  check_shape(ctx, kW, "W", {directions, gated, input});
  check_shape(ctx, kR, "R", {directions, gated, hidden});
  check_shape(ctx, kB, "B", {directions, Dim(2) * gated});
  check_shape(ctx, kSequenceLens, "sequence_lens", {batch});
  const std::vector<Dim> state =
      cell.layout == 0 ? std::vector<Dim>{directions, batch, hidden} : std::vector<Dim>{batch, directions, hidden};
  check_shape(ctx, kInitialH, "initial_h", state);
  if (cell.kind == RecurrentCellKind::Lstm) {
    check_shape(ctx, kInitialC, "initial_c", state);
    check_shape(ctx, kPeepholes, "P", {directions, Dim(3) * hidden});
  }
  const DType dtype = ctx.input_dtype(0);
  if (ctx.has_output(0)) {
    ctx.set_output(0, dtype,
                   Shape(cell.layout == 0 ? std::vector<Dim>{steps, directions, batch, hidden}
                                          : std::vector<Dim>{batch, steps, directions, hidden}));
  }
  for (size_t i = 1; i < 3 && i < ctx.output_count(); ++i) {
    if (ctx.has_output(i)) ctx.set_output(i, dtype, Shape(state));
  }
  if (ctx.has_output(3)) {
    ctx.set_output(3, dtype, Shape({directions * steps * batch * Dim(cell.reserve_width(1)) * hidden}));
  }
}

OpCost recurrent_cost(const CostContext& ctx) {
  RecurrentCell cell;
  if (!read_recurrent_cell(ctx.node.op_type, ctx.node.attributes, cell).empty()) return {};
  const Shape& w = ctx.inputs[kW];
  const Shape& r = ctx.inputs[kR];
  if (!w.rank_known || !r.rank_known || w.rank() != 3 || r.rank() != 3) return {};
  const std::optional<int64_t> input = w.dims[2].evaluate({}), hidden = r.dims[2].evaluate({});
  const int64_t x = ctx.input_numel(0);  // T·N·I
  if (!input || !hidden || *input < 1 || x == 0) return {};
  const double gate_elements =
      static_cast<double>(x / *input) * static_cast<double>(cell.directions * cell.gates() * *hidden);
  const double products = 2 * gate_elements * static_cast<double>(*input + *hidden);
  return {products + 6 * gate_elements, 2 * products + 16 * gate_elements, recurrent_serial_steps(cell, ctx.inputs[0])};
}

}  // namespace

void register_recurrent_ops(OpRegistry& registry) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    const bool lstm = std::string(op) == "LSTM";
    registry.add({.op_type = op,
                  .min_inputs = 3,
                  .max_inputs = lstm ? 8 : 6,
                  .min_outputs = 0,
                  .max_outputs = 4,  // ONNX's 3 (LSTM) or 2, then the reserve
                  .input_kinds = {InputKind::Data, InputKind::Weight, InputKind::Weight, InputKind::Weight,
                                  InputKind::NonDifferentiable, InputKind::Data, InputKind::Data, InputKind::Weight},
                  .infer = &infer_recurrent,
                  .cost = &recurrent_cost});
  }
}

}  // namespace onnxtrain
