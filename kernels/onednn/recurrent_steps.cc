#include "kernels/onednn/recurrent_steps.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>

#include "graph/error.h"
#include "kernels/cpu/elementwise_vector_math.h"
#include "kernels/scratch_arena.h"

namespace onnxtrain::onednn::recurrent {

namespace {

// 2·x clamped to ±9 (NaN stays NaN), written as min and max so that the loops vectorise: std::clamp's
// branches kept them scalar.
inline float twice_clamped(float x) { return 2.0f * std::min(std::max(x, -9.0f), 9.0f); }

}  // namespace

void sigmoid_in_place(float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = -v[i];
  cpu::elementwise::vector_exp(v, v, n);
  for (int64_t i = 0; i < n; ++i) v[i] = 1.0f / (1.0f + v[i]);
}

void tanh_in_place(float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = twice_clamped(v[i]);
  cpu::elementwise::vector_expm1(v, v, n);
  for (int64_t i = 0; i < n; ++i) v[i] = v[i] / (v[i] + 2.0f);
}

void product(bool a_transposed, bool b_transposed, int64_t rows, int64_t cols, int64_t depth, const float* a,
             int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (rows == 0 || cols == 0) return;
  const dnnl_status_t status = dnnl_sgemm(a_transposed ? 'T' : 'N', b_transposed ? 'T' : 'N', rows, cols, depth, 1.0f,
                                          a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success) throw Error("recurrent kernel: dnnl_sgemm failed with status " + std::to_string(status));
}

bool has_shorter_rows(const RecurrentGeometry& g, const Operands& in) {
  return std::any_of(in.lengths.begin(), in.lengths.end(), [&](int64_t l) { return l < g.steps; });
}

void input_products(const RecurrentGeometry& g, const Operands& in, int64_t d, float* xw) {
  const int64_t rows = g.steps * g.batch, gh = g.gated(), hs = g.hidden;
  product(false, true, rows, gh, g.input, in.x, g.input, in.w + d * gh * g.input, g.input, 0.0f, xw, gh);
  if (!in.b) return;
  const float* wb = in.b + d * 2 * gh;
  const float* rb = wb + gh;
  const bool scaled_h = g.cell.kind == RecurrentCellKind::Gru && g.cell.linear_before_reset;
  std::vector<float> bias(static_cast<size_t>(gh));
  for (int64_t q = 0; q < gh; ++q) bias[q] = wb[q] + (scaled_h && q >= 2 * hs ? 0.0f : rb[q]);
  for (int64_t row = 0; row < rows; ++row) {
    float* out = xw + row * gh;
    for (int64_t q = 0; q < gh; ++q) out[q] += bias[q];
  }
}

Tape tape_of(const RecurrentGeometry& g, int64_t d, float* reserve) {
  Tape tape;
  const reference::CpuReserveParts at = reference::cpu_reserve_parts(g, d);
  tape.gates = reserve + at.gates;
  tape.h_prev = reserve + at.h_prev;
  tape.first = reserve + at.first;
  tape.second = reserve + at.second;
  return tape;
}

namespace {

// One LSTM row: pre holds X·Wᵀ + H·Rᵀ + biases (i, o, f, c̃); becomes the activated gates; c the cell state.
void lstm_row(float* pre, const float* p, float* c, float* h, int64_t hs) {
  if (p) {
    for (int64_t j = 0; j < hs; ++j) pre[j] += p[j] * c[j], pre[2 * hs + j] += p[2 * hs + j] * c[j];
  }
  sigmoid_in_place(pre, hs);
  sigmoid_in_place(pre + 2 * hs, hs);
  tanh_in_place(pre + 3 * hs, hs);
  for (int64_t j = 0; j < hs; ++j) c[j] = pre[2 * hs + j] * c[j] + pre[j] * pre[3 * hs + j];
  if (p) {
    for (int64_t j = 0; j < hs; ++j) pre[hs + j] += p[hs + j] * c[j];
  }
  sigmoid_in_place(pre + hs, hs);
  std::copy_n(c, hs, h);
  tanh_in_place(h, hs);
  for (int64_t j = 0; j < hs; ++j) h[j] *= pre[hs + j];
}

// Every row of a block (all active, no peepholes) at once: three calls of vector exp for the block where
// lstm_row makes five per row. An LSTM of 16 units spent more time in those calls than in its product.
// work holds rows × 4·H floats.
void lstm_rows(float* pre, float* c, float* h, int64_t rows, int64_t hs, float* work) {
  const int64_t gh = 4 * hs;
  float* __restrict sig = work;                   // rows × 3·H: -(i, o, f), then exp of it
  float* __restrict cand = work + rows * 3 * hs;  // rows × H: 2·c̃ clamped as tanh_in_place does, then expm1
  for (int64_t n = 0; n < rows; ++n) {
    const float* __restrict a = pre + n * gh;
    for (int64_t q = 0; q < 3 * hs; ++q) sig[n * 3 * hs + q] = -a[q];
    for (int64_t j = 0; j < hs; ++j) cand[n * hs + j] = twice_clamped(a[3 * hs + j]);
  }
  cpu::elementwise::vector_exp(sig, sig, rows * 3 * hs);
  cpu::elementwise::vector_expm1(cand, cand, rows * hs);
  for (int64_t n = 0; n < rows; ++n) {
    float* __restrict a = pre + n * gh;
    float* __restrict cn = c + n * hs;
    float* __restrict hn = h + n * hs;
    const float* __restrict e = cand + n * hs;
    for (int64_t q = 0; q < 3 * hs; ++q) a[q] = 1.0f / (1.0f + sig[n * 3 * hs + q]);
    for (int64_t j = 0; j < hs; ++j) a[3 * hs + j] = e[j] / (e[j] + 2.0f);
    for (int64_t j = 0; j < hs; ++j) cn[j] = a[2 * hs + j] * cn[j] + a[j] * a[3 * hs + j];
    for (int64_t j = 0; j < hs; ++j) hn[j] = twice_clamped(cn[j]);
  }
  cpu::elementwise::vector_expm1(h, h, rows * hs);
  for (int64_t n = 0; n < rows; ++n) {
    float* __restrict hn = h + n * hs;
    const float* __restrict o = pre + n * gh + hs;
    for (int64_t j = 0; j < hs; ++j) hn[j] *= o[j] / (hn[j] + 2.0f);
  }
}

}  // namespace

void forward_direction(const RecurrentGeometry& g, const Operands& in, int64_t d, float* y, float* y_h, float* y_c,
                       Tape* tape) {
  const int64_t n_rows = g.batch, hs = g.hidden, gh = g.gated(), steps = g.steps;
  const RecurrentCellKind kind = g.cell.kind;
  const bool gru = kind == RecurrentCellKind::Gru, lbr = g.cell.linear_before_reset;
  const float* r = in.r + d * gh * hs;
  const float* rb = in.b ? in.b + d * 2 * gh + gh : nullptr;
  const float* p = in.p ? in.p + d * 3 * hs : nullptr;
  ScratchArena::Lease lease;  // the step's working memory, kept by the thread from run to run
  float* xw = lease.take<float>(static_cast<size_t>(steps * n_rows * gh));
  input_products(g, in, d, xw);
  std::vector<float> h(static_cast<size_t>(n_rows * hs), 0.0f), c(h.size(), 0.0f);
  for (int64_t n = 0; n < n_rows; ++n) {
    if (in.h0) std::copy_n(in.h0 + g.state_row(d, n), hs, h.begin() + n * hs);
    if (in.c0) std::copy_n(in.c0 + g.state_row(d, n), hs, c.begin() + n * hs);
  }
  // The backward's products read every row of the tape: rows past a sequence's length must hold zeros, not
  // what the pooled buffer held (0 times NaN is NaN).
  if (tape && has_shorter_rows(g, in)) std::fill_n(tape->gates, steps * n_rows * g.reserve_width(), 0.0f);
  // GRU without linear_before_reset multiplies (r ⊙ H) by Rh once r is known: the first product stops at 2H.
  const int64_t recurrent_cols = gru && !lbr ? 2 * hs : gh;
  std::vector<float> hr(static_cast<size_t>(n_rows * gh)), gates(tape ? 0 : hr.size()), reset_h(h.size());
  // Where step s computes row n's gates: straight into the tape when the backward keeps them.
  auto gates_of = [&](int64_t s, int64_t n) {
    return tape ? tape->gates + (s * n_rows + n) * gh : gates.data() + n * gh;
  };
  std::vector<float> lstm_work(kind == RecurrentCellKind::Lstm && !p ? static_cast<size_t>(n_rows * 4 * hs) : 0);
  for_row_blocks(n_rows, [&](int64_t, int64_t first, int64_t end) {
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t t = g.time_of(d, s);
      auto active = [&](int64_t n) { return t < in.lengths[n]; };
      product(false, true, end - first, recurrent_cols, hs, h.data() + first * hs, hs, r, hs, 0.0f,
              hr.data() + first * gh, gh);
      for (int64_t n = first; n < end; ++n) {
        if (!active(n)) continue;
        const float* xr = xw + g.x_row_index(t, n) * gh;
        float* a = gates_of(s, n);
        const float* hrr = hr.data() + n * gh;
        for (int64_t q = 0; q < (gru ? 2 * hs : gh); ++q) a[q] = xr[q] + hrr[q];
        if (gru) {
          sigmoid_in_place(a, 2 * hs);
          for (int64_t j = 0; j < hs; ++j) reset_h[n * hs + j] = a[hs + j] * h[n * hs + j];
        }
      }
      if (gru && !lbr) {  // hr's h block = (r ⊙ H)·Rhᵀ; Rbh is in xw
        product(false, true, end - first, hs, hs, reset_h.data() + first * hs, hs, r + 2 * hs * hs, hs, 0.0f,
                hr.data() + first * gh + 2 * hs, gh);
      }
      if (!lstm_work.empty() && std::all_of(in.lengths.begin() + first, in.lengths.begin() + end,
                                            [&](int64_t length) { return t < length; })) {
        const int64_t row = s * n_rows + first, rows = end - first;
        float *hb = h.data() + first * hs, *cb = c.data() + first * hs;
        if (tape)
          std::copy_n(hb, rows * hs, tape->h_prev + row * hs), std::copy_n(cb, rows * hs, tape->first + row * hs);
        lstm_rows(gates_of(s, first), cb, hb, rows, hs, lstm_work.data() + first * 4 * hs);
        if (tape) std::copy_n(cb, rows * hs, tape->second + row * hs);
        for (int64_t n = first; n < end && y; ++n) std::copy_n(h.data() + n * hs, hs, y + g.y_row(t, d, n));
        continue;
      }
      for (int64_t n = first; n < end; ++n) {
        if (!active(n)) {
          if (y) std::fill_n(y + g.y_row(t, d, n), hs, 0.0f);
          continue;
        }
        const size_t row = static_cast<size_t>(s * n_rows + n);
        float* a = gates_of(s, n);
        float* hn = h.data() + n * hs;
        float* cn = c.data() + n * hs;
        if (tape) std::copy_n(hn, hs, tape->h_prev + row * hs);
        if (tape && kind == RecurrentCellKind::Lstm) std::copy_n(cn, hs, tape->first + row * hs);
        const float* xr = xw + g.x_row_index(t, n) * gh;
        const float* hrr = hr.data() + n * gh;
        if (kind == RecurrentCellKind::Rnn) {
          if (g.cell.relu) {
            for (int64_t j = 0; j < hs; ++j) a[j] = std::max(a[j], 0.0f);
          } else {
            tanh_in_place(a, hs);
          }
          std::copy_n(a, hs, hn);
        } else if (kind == RecurrentCellKind::Lstm) {
          lstm_row(a, p, cn, hn, hs);
          if (tape) std::copy_n(cn, hs, tape->second + row * hs);
        } else {
          for (int64_t j = 0; j < hs; ++j) {
            const float lin = hrr[2 * hs + j] + (lbr && rb ? rb[2 * hs + j] : 0.0f);
            if (tape && lbr) tape->first[row * hs + j] = lin;
            a[2 * hs + j] = xr[2 * hs + j] + (lbr ? a[hs + j] * lin : lin);
          }
          if (tape && !lbr) std::copy_n(reset_h.begin() + n * hs, hs, tape->first + row * hs);
          tanh_in_place(a + 2 * hs, hs);
          for (int64_t j = 0; j < hs; ++j) hn[j] = (1.0f - a[j]) * a[2 * hs + j] + a[j] * hn[j];
        }
        if (y) std::copy_n(hn, hs, y + g.y_row(t, d, n));
      }
    }
  });
  for (int64_t n = 0; n < n_rows; ++n) {
    if (y_h) std::copy_n(h.begin() + n * hs, hs, y_h + g.state_row(d, n));
    if (y_c) std::copy_n(c.begin() + n * hs, hs, y_c + g.state_row(d, n));
  }
}

}  // namespace onnxtrain::onednn::recurrent
