// The sizes and element offsets of RNN, GRU, LSTM (graph/recurrent_cell.h) and their RecurrentGrad, checked
// at prepare time; shared by the reference and the CUDA kernels.
//
//   const RecurrentGeometry g = check_recurrent(spec, /*backward=*/false);
//   x[g.x_row(t, n) + i], y[g.y_row(t, d, n) + j], h0[g.state_row(d, n) + j]
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/recurrent_cell.h"
#include "kernels/reference/nn_common.h"

namespace onnxtrain::reference {

// Input slots of the forward ops; RecurrentGrad has the same and then dY, dY_h, dY_c.
enum RecurrentInput : size_t { kRecX, kRecW, kRecR, kRecB, kRecLengths, kRecInitialH, kRecInitialC, kRecPeepholes };
inline constexpr size_t kRecDY = 8, kRecDYh = 9, kRecDYc = 10, kRecReserve = 11;
// The forward's output slot of the reserve (graph/recurrent_cell.h).
inline constexpr size_t kRecReserveOutput = 3;

struct RecurrentGeometry {
  RecurrentCell cell;
  int64_t steps = 0, batch = 0, input = 0, hidden = 0;
  bool bias = false, initial_h = false, initial_c = false, peepholes = false, lengths = false;
  bool reserve = false;  // the forward writes its reserve (output 3), or the backward reads it (input 11)

  int64_t gated() const { return cell.gates() * hidden; }
  int64_t reserve_width() const { return cell.reserve_width(hidden); }
  int64_t reserve_elements() const { return cell.directions * steps * batch * reserve_width(); }
  // Offsets of the first element of a row of X (I values), Y (H) and a state (H).
  int64_t x_row(int64_t t, int64_t n) const { return x_row_index(t, n) * input; }
  int64_t x_row_index(int64_t t, int64_t n) const { return cell.layout == 0 ? t * batch + n : n * steps + t; }
  int64_t y_row(int64_t t, int64_t d, int64_t n) const {
    return (cell.layout == 0 ? (t * cell.directions + d) * batch + n : (n * steps + t) * cell.directions + d) * hidden;
  }
  int64_t state_row(int64_t d, int64_t n) const {
    return (cell.layout == 0 ? d * batch + n : n * cell.directions + d) * hidden;
  }
  // The time index of the s-th step direction d takes.
  int64_t time_of(int64_t d, int64_t s) const { return cell.runs_backwards(d) ? steps - 1 - s : s; }
};

// Where the parts of direction d's reserve start, on the CPU (the reference and oneDNN kernels alike, as
// either may run the forward and the other the backward): rows in the order the direction ran (s·N + n),
// first every row's gates, then every row's state before the step, then LSTM's cell state before and after
// the step, or GRU's one extra (H·Rhᵀ + Rbh, or r ⊙ H).
struct CpuReserveParts {
  int64_t gates = 0, h_prev = 0, first = 0, second = 0;  // element offsets into the reserve
};
inline CpuReserveParts cpu_reserve_parts(const RecurrentGeometry& g, int64_t d) {
  const int64_t rows = g.steps * g.batch, base = d * rows * g.reserve_width();
  return {base, base + rows * g.gated(), base + rows * (g.gated() + g.hidden),
          base + rows * (g.gated() + 2 * g.hidden)};
}

inline void require_recurrent_sizes(const KernelSpec& spec, size_t i, const char* name,
                                    const std::vector<int64_t>& expected) {
  if (has_input(spec, i) && spec.inputs[i].sizes != expected) {
    kernel_fail(spec, std::string(name) + " " + sizes_to_string(spec.inputs[i].sizes) + " must be " +
                          sizes_to_string(expected));
  }
}

// Reads the cell from `cell` (RecurrentGrad) or the op type, and checks every present input against X's
// sizes and hidden_size (or R's last dim); for RecurrentGrad also dY, dY_h, dY_c and each output's sizes.
inline Checked<RecurrentGeometry> check_recurrent(const KernelSpec& spec, bool backward) {
  RecurrentGeometry g;
  const std::string op = backward ? spec.attributes.get_string("cell", "") : spec.op_type;
  if (std::string refused = read_recurrent_cell(op, spec.attributes, g.cell); !refused.empty())
    kernel_fail(spec, refused);
  const DType dtype = require_same_float_dtype(spec, {kRecX, kRecW, kRecR});
  const std::vector<int64_t>& x = require_input(spec, kRecX, "X").sizes;
  const std::vector<int64_t>& r = require_input(spec, kRecR, "R").sizes;
  if (x.size() != 3 || r.size() != 3) kernel_fail(spec, "X and R must have rank 3");
  g.steps = x[g.cell.layout == 0 ? 0 : 1];
  g.batch = x[g.cell.layout == 0 ? 1 : 0];
  g.input = x[2];
  g.hidden = g.cell.hidden > 0 ? g.cell.hidden : r[2];
  const int64_t d = g.cell.directions, gh = g.gated();
  require_recurrent_sizes(spec, kRecW, "W", {d, gh, g.input});
  require_recurrent_sizes(spec, kRecR, "R", {d, gh, g.hidden});
  require_recurrent_sizes(spec, kRecB, "B", {d, 2 * gh});
  require_recurrent_sizes(spec, kRecLengths, "sequence_lens", {g.batch});
  const std::vector<int64_t> state =
      g.cell.layout == 0 ? std::vector<int64_t>{d, g.batch, g.hidden} : std::vector<int64_t>{g.batch, d, g.hidden};
  require_recurrent_sizes(spec, kRecInitialH, "initial_h", state);
  require_recurrent_sizes(spec, kRecInitialC, "initial_c", state);
  require_recurrent_sizes(spec, kRecPeepholes, "P", {d, 3 * g.hidden});
  g.bias = has_input(spec, kRecB);
  g.lengths = has_input(spec, kRecLengths);
  g.initial_h = has_input(spec, kRecInitialH);
  g.initial_c = g.cell.kind == RecurrentCellKind::Lstm && has_input(spec, kRecInitialC);
  g.peepholes = g.cell.kind == RecurrentCellKind::Lstm && has_input(spec, kRecPeepholes);
  if (g.lengths && spec.inputs[kRecLengths].dtype != DType::Int32 && spec.inputs[kRecLengths].dtype != DType::Int64) {
    kernel_fail(spec, "sequence_lens must be int32");
  }
  for (size_t i : {kRecB, kRecInitialH, kRecInitialC, kRecPeepholes}) {
    if (has_input(spec, i) && spec.inputs[i].dtype != dtype) kernel_fail(spec, "every float input must be X's dtype");
  }
  const std::vector<int64_t> y = g.cell.layout == 0 ? std::vector<int64_t>{g.steps, d, g.batch, g.hidden}
                                                    : std::vector<int64_t>{g.batch, g.steps, d, g.hidden};
  const std::vector<int64_t> reserve{g.reserve_elements()};
  if (!backward) {
    if (has_output(spec, 0)) require_output(spec, 0, dtype, y);
    for (size_t i = 1; i < kRecReserveOutput && i < spec.outputs.size(); ++i) {
      if (has_output(spec, i)) require_output(spec, i, dtype, state);
    }
    g.reserve = has_output(spec, kRecReserveOutput);
    if (g.reserve) require_output(spec, kRecReserveOutput, dtype, reserve);
    return {dtype, g};
  }
  g.reserve = true;
  if (require_input(spec, kRecReserve, "the forward's reserve").dtype != dtype) {
    kernel_fail(spec, "the reserve must be X's dtype");
  }
  require_recurrent_sizes(spec, kRecReserve, "the reserve", reserve);
  require_recurrent_sizes(spec, kRecDY, "dY", y);
  require_recurrent_sizes(spec, kRecDYh, "dY_h", state);
  require_recurrent_sizes(spec, kRecDYc, "dY_c", state);
  for (size_t k = 0; k < spec.outputs.size() && k < std::size(kRecurrentGradientOf); ++k) {
    if (!has_output(spec, k)) continue;
    if (!has_input(spec, kRecurrentGradientOf[k]))
      kernel_fail(spec, "output " + std::to_string(k) + " has no forward input");
    require_output(spec, k, dtype, spec.inputs[kRecurrentGradientOf[k]].sizes);
  }
  return {dtype, g};
}

}  // namespace onnxtrain::reference
