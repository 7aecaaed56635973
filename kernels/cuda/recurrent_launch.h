// Launchers of the elementwise CUDA kernels of RNN, GRU, LSTM and RecurrentGrad (recurrent.cu), called by
// recurrent.cc between its cuBLAS products. Each launcher runs one step of one direction over the N×H
// (batch row, hidden unit) elements; the products H·Rᵀ before it and the gradients' products after it are
// recurrent.cc's. Enqueue on `stream`, never synchronise; float and double.
//
// Rows: batch row n at time t is row `first_row + n·row_stride` of X's (T·N) rows in X's own order
// (layout 0: t·N + n, layout 1: n·T + t). X·Wᵀ for every step and every per-step buffer the backward keeps
// (RecurrentTape) use these rows, so one product covers all steps in either layout.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace onnxtrain::cuda {

enum class RecurrentCellType : int { Rnn, Gru, Lstm };

// What the forward keeps for the backward, (rows, ·) each in X's row order; null where not kept. In the
// workspace, or in the node's reserve (recurrent.cc's reserve_tape) where the backward reads it without
// rerunning the forward. A row past its sequence_lens gets zero gates and its kept state, so the
// products over all rows stay finite (and every element of the reserve is written).
template <typename T>
struct RecurrentTape {
  T* gates = nullptr;     // (rows, G·H): LSTM i, o, f, c̃; GRU z, r, h̃; RNN h
  T* h_prev = nullptr;    // (rows, H): the state the step read
  T* c_prev = nullptr;    // LSTM (rows, H): the cell state before the step
  T* c = nullptr;         // LSTM (rows, H): and after it
  T* h_linear = nullptr;  // GRU linear_before_reset (rows, H): H·Rhᵀ + Rbh
  T* reset_h = nullptr;   // GRU otherwise (rows, H): r ⊙ H, the h gate's product's operand (forward op too)
};

// One step of one direction. The forward kernels read the first two groups and write h, c, y and tape;
// the backward kernels read tape and the third group and write dh, dc, dgx, dgh.
template <typename T>
struct RecurrentStep {
  RecurrentCellType cell = RecurrentCellType::Rnn;
  bool linear_before_reset = false;
  bool relu = false;  // RNN's f is Relu
  int64_t batch = 0, hidden = 0;
  int64_t time = 0;                  // the step's t: a row with lengths[n] <= t keeps its state
  const int64_t* lengths = nullptr;  // (N) sequence_lens, checked (launch_recurrent_lengths)
  int64_t first_row = 0, row_stride = 1;

  const T* xw = nullptr;  // (rows, G·H): X·Wᵀ
  const T* hr = nullptr;  // (N, G·H): H·Rᵀ; GRU without linear_before_reset: its h gate (r ⊙ H)·Rhᵀ
  const T *wb = nullptr, *rb = nullptr;  // (G·H) each, null without B
  const T* p = nullptr;                  // LSTM (3·H) peepholes i, o, f, or null
  T* h = nullptr;                        // (N, H): the state, replaced by the step's output
  T* c = nullptr;                        // LSTM (N, H): the cell state, likewise
  T* y = nullptr;                        // Y's row of batch row n: y + n·y_stride; null: no Y
  int64_t y_stride = 0;
  RecurrentTape<T> tape;

  const T* dy = nullptr;   // dY's row of batch row n: dy + n·y_stride; null: no dY
  T* dh = nullptr;         // (N, H): the state's gradient, replaced by the previous state's (direct part)
  T* dc = nullptr;         // LSTM (N, H): the cell state's gradient, replaced by the previous one's
  const T* drh = nullptr;  // GRU without linear_before_reset (N, H): dGh's h gate · Rh
  T* dgx = nullptr;        // (rows, G·H): the gates' pre-activation gradients on the X·Wᵀ side
  T* dgh = nullptr;        // (rows, G·H): on the H·Rᵀ side; == dgx except for GRU
};

inline constexpr int kBadSequenceLength = 1;  // device_error_flag.h code

// lengths[n] = sequence_lens[n] (int32 or int64; `steps` for every row when `sequence_lens` is null). A
// value outside 0..steps is clamped and raises `flag` (the kernel's next run throws, as the reference does).
void launch_recurrent_lengths(const void* sequence_lens, bool int64_lengths, int64_t batch, int64_t steps,
                              int64_t* lengths, int* flag, cudaStream_t stream);

// GRU without linear_before_reset, before the h gate's product: tape.reset_h = r ⊙ h (0 past the length).
template <typename T>
void launch_gru_reset_product(const RecurrentStep<T>& step, cudaStream_t stream);

// The step's cell: gates, new h (and c), Y's rows, the tape.
template <typename T>
void launch_recurrent_cell(const RecurrentStep<T>& step, cudaStream_t stream);

// The step backwards: dY added into dh, the gate gradients into dgx/dgh, dh replaced by its direct part
// (the product dGh·R is added after) and dc by the previous cell state's gradient. GRU without
// linear_before_reset leaves its r gate to launch_gru_reset_grad.
template <typename T>
void launch_recurrent_cell_grad(const RecurrentStep<T>& step, cudaStream_t stream);

// GRU without linear_before_reset, after drh = dGx(h gate)·Rh: the r gate's gradients, and drh ⊙ r into dh.
template <typename T>
void launch_gru_reset_grad(const RecurrentStep<T>& step, cudaStream_t stream);

// out[k] = Σ_row m[row·ld + k] for k < cols (B's gradients), summed in double in row order.
template <typename T>
void launch_recurrent_column_sums(const T* m, int64_t rows, int64_t cols, int64_t ld, T* out, cudaStream_t stream);

// LSTM's dP (3·H): Σ_row dgx(i)·c_prev, dgx(o)·c, dgx(f)·c_prev over the tape's rows.
template <typename T>
void launch_peephole_grad(const T* dgx, const T* c_prev, const T* c, int64_t rows, int64_t hidden, T* dp,
                          cudaStream_t stream);

}  // namespace onnxtrain::cuda
