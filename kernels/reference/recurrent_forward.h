// The forward pass of RNN, GRU and LSTM over one direction, in double, optionally recording what the
// backward through time needs (RecurrentTape), which the reference forward kernel (recurrent.cc) packs
// into its reserve for RecurrentGrad's (recurrent_grad.cc). The equations are ONNX's
// (graph/recurrent_cell.h, onnx/defs/rnn/defs.cc): LSTM gates i, o, f, c with optional peepholes; GRU
// gates z, r, h with linear_before_reset either way. A batch row past its sequence_lens keeps its
// state and writes zeros to Y.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "graph/error.h"
#include "kernels/reference/recurrent_geometry.h"

namespace onnxtrain::reference {

template <typename T>
struct RecurrentOperands {
  const T *x = nullptr, *w = nullptr, *r = nullptr, *b = nullptr, *h0 = nullptr, *c0 = nullptr, *p = nullptr;
  std::vector<int64_t> lengths;  // per batch row: sequence_lens, or all steps
};

// Per step s of a direction (in the order it runs), per batch row: the activated gates (LSTM i, o, f, c̃;
// GRU z, r, h̃; RNN h), the state before the step, LSTM's cell state before and after, and GRU's
// linear_before_reset product H·Rhᵀ + Rbh.
struct RecurrentTape {
  std::vector<double> gates, h_prev, c_prev, c, h_linear;
};

inline double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// sequence_lens as int64, each checked to be within 0..steps; all steps without it.
template <typename Int>
std::vector<int64_t> checked_lengths(const Int* lengths, const RecurrentGeometry& g) {
  std::vector<int64_t> out(static_cast<size_t>(g.batch), g.steps);
  for (int64_t n = 0; lengths && n < g.batch; ++n) {
    out[n] = static_cast<int64_t>(lengths[n]);
    if (out[n] < 0 || out[n] > g.steps) {
      throw Error("sequence_lens[" + std::to_string(n) + "] = " + std::to_string(out[n]) + " is outside 0.." +
                  std::to_string(g.steps) + " (the sequence's length)");
    }
  }
  return out;
}

// The operands of a forward node's kernel (or RecurrentGrad's, inputs 0-7) as `g` reads them.
template <typename T>
RecurrentOperands<T> recurrent_operands(const RecurrentGeometry& g, std::span<const TensorView> in) {
  RecurrentOperands<T> o;
  auto optional = [&](size_t i) { return has_view(in, i) ? in[i].as<const T>() : nullptr; };
  o.x = in[kRecX].as<const T>();
  o.w = in[kRecW].as<const T>();
  o.r = in[kRecR].as<const T>();
  o.b = g.bias ? optional(kRecB) : nullptr;
  o.h0 = g.initial_h ? optional(kRecInitialH) : nullptr;
  o.c0 = g.initial_c ? optional(kRecInitialC) : nullptr;
  o.p = g.peepholes ? optional(kRecPeepholes) : nullptr;
  if (!g.lengths || !has_view(in, kRecLengths)) {
    o.lengths = checked_lengths<int32_t>(nullptr, g);
  } else if (in[kRecLengths].dtype == DType::Int32) {
    o.lengths = checked_lengths(in[kRecLengths].as<const int32_t>(), g);
  } else {
    o.lengths = checked_lengths(in[kRecLengths].as<const int64_t>(), g);
  }
  return o;
}

// Runs direction d: writes Y's rows of d (if y), Y_h and Y_c's (if given), and fills `tape` (if given).
template <typename T>
void recurrent_forward_direction(const RecurrentGeometry& g, const RecurrentOperands<T>& in, int64_t d, T* y, T* y_h,
                                 T* y_c, RecurrentTape* tape) {
  const int64_t n_rows = g.batch, hs = g.hidden, is = g.input, gh = g.gated();
  const RecurrentCellKind kind = g.cell.kind;
  const T* w = in.w + d * gh * is;
  const T* r = in.r + d * gh * hs;
  const T* wb = in.b ? in.b + d * 2 * gh : nullptr;
  const T* rb = wb ? wb + gh : nullptr;
  const T* p = in.p ? in.p + d * 3 * hs : nullptr;
  std::vector<double> h(n_rows * hs, 0.0), c(n_rows * hs, 0.0);
  for (int64_t n = 0; n < n_rows; ++n) {
    for (int64_t j = 0; j < hs; ++j) {
      if (in.h0) h[n * hs + j] = static_cast<double>(in.h0[g.state_row(d, n) + j]);
      if (in.c0) c[n * hs + j] = static_cast<double>(in.c0[g.state_row(d, n) + j]);
    }
  }
  if (tape) {
    const size_t steps_rows = static_cast<size_t>(g.steps * n_rows);
    tape->gates.assign(steps_rows * gh, 0.0);
    tape->h_prev.assign(steps_rows * hs, 0.0);
    if (kind == RecurrentCellKind::Lstm)
      tape->c_prev.assign(steps_rows * hs, 0.0), tape->c.assign(steps_rows * hs, 0.0);
    if (g.cell.linear_before_reset) tape->h_linear.assign(steps_rows * hs, 0.0);
  }
  std::vector<double> pre(gh);
  for (int64_t s = 0; s < g.steps; ++s) {
    const int64_t t = g.time_of(d, s);
    for (int64_t n = 0; n < n_rows; ++n) {
      if (t >= in.lengths[n]) {
        if (y) std::fill_n(y + g.y_row(t, d, n), hs, T(0));
        continue;
      }
      const T* xr = in.x + g.x_row(t, n);
      double* hr = h.data() + n * hs;  // the state before the step, replaced by the one after
      double* cr = c.data() + n * hs;
      const size_t row = static_cast<size_t>(s * n_rows + n);
      if (tape) std::copy_n(hr, hs, tape->h_prev.begin() + row * hs);
      if (tape && kind == RecurrentCellKind::Lstm) std::copy_n(cr, hs, tape->c_prev.begin() + row * hs);
      // pre = X·Wᵀ + H·Rᵀ + Wb + Rb per gate element; GRU's h gate: X·Whᵀ + Wbh, its R part below.
      for (int64_t q = 0; q < gh; ++q) {
        const bool reset_first = kind == RecurrentCellKind::Gru && q >= 2 * hs;
        double v = wb ? static_cast<double>(wb[q]) + (reset_first ? 0.0 : static_cast<double>(rb[q])) : 0.0;
        for (int64_t i = 0; i < is; ++i) v += static_cast<double>(xr[i]) * static_cast<double>(w[q * is + i]);
        if (!reset_first) {
          for (int64_t k = 0; k < hs; ++k) v += hr[k] * static_cast<double>(r[q * hs + k]);
        }
        pre[q] = v;
      }
      double* gates = tape ? tape->gates.data() + row * gh : nullptr;
      std::vector<double> out(hs), c_out(hs);
      if (kind == RecurrentCellKind::Rnn) {
        for (int64_t j = 0; j < hs; ++j) out[j] = g.cell.relu ? std::max(pre[j], 0.0) : std::tanh(pre[j]);
        if (gates) std::copy_n(out.begin(), hs, gates);
      } else if (kind == RecurrentCellKind::Gru) {
        std::vector<double> z(hs), rr(hs);
        for (int64_t j = 0; j < hs; ++j) z[j] = sigmoid(pre[j]), rr[j] = sigmoid(pre[hs + j]);
        for (int64_t j = 0; j < hs; ++j) {
          // The h gate's recurrent part: r ⊙ (H·Rhᵀ + Rbh), or (r ⊙ H)·Rhᵀ + Rbh.
          double lin = rb ? static_cast<double>(rb[2 * hs + j]) : 0.0;
          const T* rh_row = r + (2 * hs + j) * hs;
          if (g.cell.linear_before_reset) {
            for (int64_t k = 0; k < hs; ++k) lin += hr[k] * static_cast<double>(rh_row[k]);
            if (tape) tape->h_linear[row * hs + j] = lin;
            lin *= rr[j];
          } else {
            for (int64_t k = 0; k < hs; ++k) lin += rr[k] * hr[k] * static_cast<double>(rh_row[k]);
          }
          const double candidate = std::tanh(pre[2 * hs + j] + lin);
          out[j] = (1.0 - z[j]) * candidate + z[j] * hr[j];
          if (gates) gates[j] = z[j], gates[hs + j] = rr[j], gates[2 * hs + j] = candidate;
        }
      } else {
        for (int64_t j = 0; j < hs; ++j) {
          const double ig = sigmoid(pre[j] + (p ? static_cast<double>(p[j]) * cr[j] : 0.0));
          const double fg = sigmoid(pre[2 * hs + j] + (p ? static_cast<double>(p[2 * hs + j]) * cr[j] : 0.0));
          const double cand = std::tanh(pre[3 * hs + j]);
          c_out[j] = fg * cr[j] + ig * cand;
          const double og = sigmoid(pre[hs + j] + (p ? static_cast<double>(p[hs + j]) * c_out[j] : 0.0));
          out[j] = og * std::tanh(c_out[j]);
          if (gates) gates[j] = ig, gates[hs + j] = og, gates[2 * hs + j] = fg, gates[3 * hs + j] = cand;
        }
        std::copy_n(c_out.begin(), hs, cr);
        if (tape) std::copy_n(cr, hs, tape->c.begin() + row * hs);
      }
      std::copy_n(out.begin(), hs, hr);
      if (y) {
        for (int64_t j = 0; j < hs; ++j) y[g.y_row(t, d, n) + j] = static_cast<T>(out[j]);
      }
    }
  }
  for (int64_t n = 0; n < n_rows; ++n) {
    for (int64_t j = 0; j < hs; ++j) {
      if (y_h) y_h[g.state_row(d, n) + j] = static_cast<T>(h[n * hs + j]);
      if (y_c) y_c[g.state_row(d, n) + j] = static_cast<T>(c[n * hs + j]);
    }
  }
}

// Copies direction d's tape to the reserve (cpu_reserve_parts), or back: the forward kernel keeps it, the
// backward reads it instead of running the forward again.
template <typename T>
void pack_tape(const RecurrentGeometry& g, int64_t d, const RecurrentTape& tape, T* reserve) {
  const CpuReserveParts at = cpu_reserve_parts(g, d);
  const int64_t rows = g.steps * g.batch, hs = g.hidden, gh = g.gated();
  for (int64_t i = 0; i < rows * gh; ++i) reserve[at.gates + i] = static_cast<T>(tape.gates[i]);
  for (int64_t i = 0; i < rows * hs; ++i) {
    reserve[at.h_prev + i] = static_cast<T>(tape.h_prev[i]);
    if (g.cell.kind == RecurrentCellKind::Lstm) {
      reserve[at.first + i] = static_cast<T>(tape.c_prev[i]);
      reserve[at.second + i] = static_cast<T>(tape.c[i]);
    } else if (g.cell.kind == RecurrentCellKind::Gru) {  // r ⊙ H where the oneDNN kernel keeps that
      const double reset_h = tape.gates[i / hs * gh + hs + i % hs] * tape.h_prev[i];
      reserve[at.first + i] = static_cast<T>(g.cell.linear_before_reset ? tape.h_linear[i] : reset_h);
    }
  }
}

template <typename T>
RecurrentTape unpack_tape(const RecurrentGeometry& g, int64_t d, const T* reserve) {
  const CpuReserveParts at = cpu_reserve_parts(g, d);
  const int64_t rows = g.steps * g.batch, hs = g.hidden, gh = g.gated();
  auto part = [&](int64_t offset, int64_t count) {
    return std::vector<double>(reserve + offset, reserve + offset + count);
  };
  RecurrentTape tape;
  tape.gates = part(at.gates, rows * gh);
  tape.h_prev = part(at.h_prev, rows * hs);
  if (g.cell.kind == RecurrentCellKind::Lstm)
    tape.c_prev = part(at.first, rows * hs), tape.c = part(at.second, rows * hs);
  if (g.cell.linear_before_reset) tape.h_linear = part(at.first, rows * hs);
  return tape;
}

}  // namespace onnxtrain::reference
