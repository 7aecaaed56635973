// What the ONNX recurrent ops RNN, GRU and LSTM (opsets 7 and 14) compute, read from a node's attributes:
// shared by their schemas (graph/ops/recurrent.cc), their backward op RecurrentGrad and the kernels
// (kernels/reference/recurrent*.cc, kernels/cuda/recurrent.cu), so that every side refuses the same things.
//
// Inputs (X, W, R, B, sequence_lens, initial_h[, initial_c, P]), with D directions, G gates, H hidden:
//   X (T, N, I), layout 1: (N, T, I); W (D, G·H, I); R (D, G·H, H); B (D, 2·G·H): W's bias then R's;
//   sequence_lens (N) int32; initial_h and initial_c (D, N, H), layout 1: (N, D, H); P (D, 3·H): LSTM's
//   peepholes i, o, f.
// Outputs Y (T, D, N, H), layout 1: (N, T, D, H); Y_h and Y_c (D, N, H), layout 1: (N, D, H). In training
// graphs only, output 3 is onnxtrain's reserve (as cuDNN's reserve space): what the backward needs of each
// step, kept from the forward so that RecurrentGrad need not run it again; D · T · N · reserve_width
// elements of X's dtype, laid out as the device's kernels choose.
// Gates, in ONNX's order: RNN i (tanh, or relu); GRU z, r, h (sigmoid, sigmoid, tanh); LSTM i, o, f, c
// (sigmoid three times, tanh; C's output through tanh). The default activations, and RNN's Relu, are the
// ones onnxtrain has, as exporters write them: others, `clip` and LSTM's `input_forget` are refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/attributes.h"
#include "graph/shape.h"

namespace onnxtrain {

enum class RecurrentCellKind { Rnn, Gru, Lstm };

// RecurrentGrad's output k is the gradient of the forward's input kRecurrentGradientOf[k]: X, W, R, B, then
// initial_h, initial_c and P (sequence_lens, input 4, has none). The schemas, the gradient rule and the
// kernels all read it here.
inline constexpr size_t kRecurrentGradientOf[] = {0, 1, 2, 3, 5, 6, 7};

struct RecurrentCell {
  RecurrentCellKind kind = RecurrentCellKind::Rnn;
  int64_t hidden = 0;                // hidden_size; 0 when the attribute is absent (then R's last dim says)
  int64_t directions = 1;            // 2 for "bidirectional"
  bool reverse = false;              // "reverse": the only direction runs from the last step to the first
  int64_t layout = 0;                // 0: time-major (T, N, ...); 1: batch-major (N, T, ...)
  bool linear_before_reset = false;  // GRU: r multiplies (H·Rhᵀ + Rbh) instead of H before the product
  bool relu = false;                 // RNN: f is Relu, not Tanh (nn.RNN(nonlinearity="relu"))

  int64_t gates() const { return kind == RecurrentCellKind::Rnn ? 1 : kind == RecurrentCellKind::Gru ? 3 : 4; }
  // Per direction, step and batch row, the reserve holds the activated gates, the state before the step, and
  // LSTM's cell state before and after it or GRU's H·Rhᵀ + Rbh (linear_before_reset) or r ⊙ H (without).
  int64_t reserve_width(int64_t hidden_size) const {
    return (gates() + 1 + (kind == RecurrentCellKind::Lstm ? 2 : kind == RecurrentCellKind::Gru ? 1 : 0)) * hidden_size;
  }
  // Direction d of a bidirectional op runs backwards for d == 1.
  bool runs_backwards(int64_t d) const { return reverse || d == 1; }
};

// "RNN", "GRU" or "LSTM" (a forward op type, or RecurrentGrad's `cell` attribute); false for anything else.
bool recurrent_cell_kind(const std::string& op_type, RecurrentCellKind& kind);

// The cell of a node of op `op_type` with these attributes. Returns an empty string when onnxtrain runs it,
// else what it refuses (an unknown direction, layout or activation, `clip`, `input_forget`), for the caller
// to raise against the node.
std::string read_recurrent_cell(const std::string& op_type, const Attributes& attributes, RecurrentCell& cell);

// OpCost::serial_steps of the forward and of RecurrentGrad alike: every direction's T steps, one after
// another (the kernels run the directions in turn); 0 while X's T is unknown.
double recurrent_serial_steps(const RecurrentCell& cell, const Shape& x);

}  // namespace onnxtrain
