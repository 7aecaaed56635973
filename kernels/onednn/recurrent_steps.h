// The float32 CPU kernels of RNN, GRU and LSTM (recurrent.cc) and RecurrentGrad (recurrent_grad.cc): the
// products as oneDNN sgemm calls, the gates in vectorised exp (kernels/cpu/elementwise_vector_math.h).
// The input side of every step is one product over the whole sequence, X·Wᵀ (T·N rows); each step then
// multiplies only the state, H·Rᵀ (N rows), as cuDNN's and oneDNN's RNN primitives do. The backward keeps
// the gates' gradients of every step and makes dX, dW, dR and dB four products over all steps after the
// loop, where the reference kernel (kernels/reference/recurrent_grad.cc, the same equations in double)
// accumulates them step by step.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/reference/recurrent_forward.h"

namespace onnxtrain::onednn::recurrent {

using reference::RecurrentGeometry;

// sigmoid and tanh over n floats, in place. tanh(x) = expm1(2x) / (expm1(2x) + 2), exact near 0, with x
// clamped to ±9, where tanh rounds to ±1 in float32.
void sigmoid_in_place(float* v, int64_t n);
void tanh_in_place(float* v, int64_t n);

// The operands as the reference kernels read them (kernels/reference/recurrent_forward.h).
using Operands = reference::RecurrentOperands<float>;

// What one direction's backward reads, per step s in the order the direction ran (row s·N + n): the gates
// after their activations (LSTM i, o, f, c̃; GRU z, r, h̃; RNN h), the state before the step, and `first`
// and `second`: LSTM's cell state before and after it, or GRU's H·Rhᵀ + Rbh (linear_before_reset) or r ⊙ H
// (without). It points into the node's reserve (reference::cpu_reserve_parts).
struct Tape {
  float *gates = nullptr, *h_prev = nullptr, *first = nullptr, *second = nullptr;
};

// Direction d's tape in `reserve` (the forward's output 3, the backward's input 11).
Tape tape_of(const RecurrentGeometry& g, int64_t d, float* reserve);

// xw (T·N rows × G·H) = X·Wᵀ + the biases the input side carries, one row per row of X (X's own order): Wb, and Rb for
// every gate whose recurrent product is not scaled by r (all but GRU's h gate under either linear_before_reset).
void input_products(const RecurrentGeometry& g, const Operands& in, int64_t d, float* xw);

// Whether some batch row is shorter than the sequence (sequence_lens): rows past it are never written.
bool has_shorter_rows(const RecurrentGeometry& g, const Operands& in);

// Direction d forward: Y's rows (if y), Y_h and Y_c (if given), and the tape (if given).
void forward_direction(const RecurrentGeometry& g, const Operands& in, int64_t d, float* y, float* y_h, float* y_c,
                       Tape* tape);

// Batch rows never meet in the recurrence: body(block, first, end) runs every step of rows [first, end) on
// one thread, its products included, so the threads meet once per direction instead of twice per step. A
// product of 32 rows (an LSTM of 256 hidden, batch 32) hardly gains from a second thread inside oneDNN's
// sgemm: 192 -> 175 us, and 6.6 ms beside a busy process; two threads with 16 rows each took 117-119 us in
// both cases (a scratch program, 2026-12-07; README "Recurrent networks"). The block's own products must
// not fork: without omp_set_num_threads(1) below, 80% of a 2-thread run's samples were in libgomp (perf)
// and a step took 208 ms.
template <typename Body>
void for_row_blocks(int64_t rows, const Body& body) {
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), rows));
#pragma omp parallel for num_threads(blocks) schedule(static, 1)
  for (int64_t b = 0; b < blocks; ++b) {
    omp_set_num_threads(1);  // for this implicit task's nested regions: oneDNN's sgemm runs on this thread
    body(b, rows * b / blocks, rows * (b + 1) / blocks);
  }
}

// C (rows × cols) = A·B + beta·C in row-major float32 (oneDNN's sgemm), A or B read transposed.
void product(bool a_transposed, bool b_transposed, int64_t rows, int64_t cols, int64_t depth, const float* a,
             int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace onnxtrain::onednn::recurrent
