// RecurrentGrad: per direction, the forward's tape (from its reserve: recurrent_forward.h), then back
// through time from the last step it ran to the first. At each step the gradient reaching the state (dY's row plus
// what the later step sent back) becomes the gates' pre-activation gradients: dGx for the X·Wᵀ side,
// dGh for the H·Rᵀ side (they differ only in GRU's h gate), from which dX, dW, dR, dB, dP and the
// previous state's gradient follow. Rows past their sequence_lens pass the state's gradient through.
#include "kernels/reference/recurrent_forward.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

struct RecurrentGrads {
  std::vector<double> dx, dw, dr, db, dh0, dc0, dp;  // each shaped like its forward input
};

template <typename T>
void backward_direction(const RecurrentGeometry& g, const RecurrentOperands<T>& in, std::span<const TensorView> views,
                        int64_t d, RecurrentGrads& out) {
  const RecurrentTape tape = unpack_tape(g, d, views[kRecReserve].as<const T>());
  const int64_t n_rows = g.batch, hs = g.hidden, is = g.input, gh = g.gated();
  const RecurrentCellKind kind = g.cell.kind;
  const bool reset_first = kind == RecurrentCellKind::Gru && !g.cell.linear_before_reset;
  const T* w = in.w + d * gh * is;
  const T* r = in.r + d * gh * hs;
  const T* p = in.p ? in.p + d * 3 * hs : nullptr;
  const T* dy = has_view(views, kRecDY) ? views[kRecDY].as<const T>() : nullptr;
  const T* dy_h = has_view(views, kRecDYh) ? views[kRecDYh].as<const T>() : nullptr;
  const T* dy_c = has_view(views, kRecDYc) ? views[kRecDYc].as<const T>() : nullptr;
  double* dw = out.dw.data() + d * gh * is;
  double* dr = out.dr.data() + d * gh * hs;
  double* dwb = out.db.data() + d * 2 * gh;
  double* drb = dwb + gh;
  double* dp = out.dp.data() + d * 3 * hs;
  std::vector<double> dh(n_rows * hs, 0.0), dc(n_rows * hs, 0.0);
  for (int64_t n = 0; n < n_rows; ++n) {
    for (int64_t j = 0; j < hs; ++j) {
      if (dy_h) dh[n * hs + j] = static_cast<double>(dy_h[g.state_row(d, n) + j]);
      if (dy_c) dc[n * hs + j] = static_cast<double>(dy_c[g.state_row(d, n) + j]);
    }
  }
  std::vector<double> dgx(gh), dgh(gh), dhp(hs), rh(hs);
  for (int64_t s = g.steps - 1; s >= 0; --s) {
    const int64_t t = g.time_of(d, s);
    for (int64_t n = 0; n < n_rows; ++n) {
      if (t >= in.lengths[n]) continue;
      const size_t row = static_cast<size_t>(s * n_rows + n);
      const double* gates = tape.gates.data() + row * gh;
      const double* hp = tape.h_prev.data() + row * hs;
      double* dhr = dh.data() + n * hs;
      double* dcr = dc.data() + n * hs;
      if (dy) {
        for (int64_t j = 0; j < hs; ++j) dhr[j] += static_cast<double>(dy[g.y_row(t, d, n) + j]);
      }
      std::fill(dhp.begin(), dhp.end(), 0.0);
      if (kind == RecurrentCellKind::Rnn) {
        for (int64_t j = 0; j < hs; ++j) {
          dgx[j] = dgh[j] = dhr[j] * (g.cell.relu ? (gates[j] > 0.0 ? 1.0 : 0.0) : 1.0 - gates[j] * gates[j]);
        }
      } else if (kind == RecurrentCellKind::Lstm) {
        const double* cp = tape.c_prev.data() + row * hs;
        const double* cc = tape.c.data() + row * hs;
        for (int64_t j = 0; j < hs; ++j) {
          const double ig = gates[j], og = gates[hs + j], fg = gates[2 * hs + j], cand = gates[3 * hs + j];
          const double tc = std::tanh(cc[j]);
          const double dpo = dhr[j] * tc * og * (1.0 - og);
          double dct = dcr[j] + dhr[j] * og * (1.0 - tc * tc);
          if (p) dct += dpo * static_cast<double>(p[hs + j]), dp[hs + j] += dpo * cc[j];
          const double dpi = dct * cand * ig * (1.0 - ig);
          const double dpf = dct * cp[j] * fg * (1.0 - fg);
          const double dpc = dct * ig * (1.0 - cand * cand);
          dcr[j] = dct * fg;  // the cell state's gradient one step back
          if (p) {
            dcr[j] += dpi * static_cast<double>(p[j]) + dpf * static_cast<double>(p[2 * hs + j]);
            dp[j] += dpi * cp[j];
            dp[2 * hs + j] += dpf * cp[j];
          }
          dgx[j] = dpi, dgx[hs + j] = dpo, dgx[2 * hs + j] = dpf, dgx[3 * hs + j] = dpc;
        }
        std::copy(dgx.begin(), dgx.end(), dgh.begin());
      } else {
        std::vector<double> dreset(hs);
        for (int64_t j = 0; j < hs; ++j) {
          const double z = gates[j], cand = gates[2 * hs + j];
          dgx[j] = dhr[j] * (hp[j] - cand) * z * (1.0 - z);
          dgx[2 * hs + j] = dhr[j] * (1.0 - z) * (1.0 - cand * cand);
          dhp[j] = dhr[j] * z;
        }
        const T* rhw = r + 2 * hs * hs;  // Rh
        if (g.cell.linear_before_reset) {
          for (int64_t j = 0; j < hs; ++j) {
            dreset[j] = dgx[2 * hs + j] * tape.h_linear[row * hs + j];
            dgh[2 * hs + j] = dgx[2 * hs + j] * gates[hs + j];
          }
        } else {  // the h gate's product reads r ⊙ H: its gradient splits between r and H
          for (int64_t k = 0; k < hs; ++k) {
            double drh = 0.0;
            for (int64_t j = 0; j < hs; ++j) drh += dgx[2 * hs + j] * static_cast<double>(rhw[j * hs + k]);
            dreset[k] = drh * hp[k];
            dhp[k] += drh * gates[hs + k];
            rh[k] = gates[hs + k] * hp[k];
          }
          for (int64_t j = 0; j < hs; ++j) dgh[2 * hs + j] = dgx[2 * hs + j];
        }
        for (int64_t j = 0; j < hs; ++j) {
          dgx[hs + j] = dreset[j] * gates[hs + j] * (1.0 - gates[hs + j]);
          dgh[j] = dgx[j], dgh[hs + j] = dgx[hs + j];
        }
      }
      const T* xr = in.x + g.x_row(t, n);
      double* dxr = out.dx.data() + g.x_row(t, n);
      for (int64_t q = 0; q < gh; ++q) {
        const bool reads_reset = reset_first && q >= 2 * hs;  // GRU's h gate: its R reads r ⊙ H, done above
        dwb[q] += dgx[q];
        drb[q] += dgh[q];
        for (int64_t i = 0; i < is; ++i) {
          dxr[i] += dgx[q] * static_cast<double>(w[q * is + i]);
          dw[q * is + i] += dgx[q] * static_cast<double>(xr[i]);
        }
        for (int64_t k = 0; k < hs; ++k) {
          dr[q * hs + k] += dgh[q] * (reads_reset ? rh[k] : hp[k]);
          if (!reads_reset) dhp[k] += dgh[q] * static_cast<double>(r[q * hs + k]);
        }
      }
      std::copy(dhp.begin(), dhp.end(), dhr);
    }
  }
  for (int64_t n = 0; n < n_rows; ++n) {
    for (int64_t j = 0; j < hs; ++j) {
      out.dh0[g.state_row(d, n) + j] = dh[n * hs + j];
      out.dc0[g.state_row(d, n) + j] = dc[n * hs + j];
    }
  }
}

template <typename T>
void recurrent_grad(const RecurrentGeometry& g, std::span<const TensorView> in, std::span<const TensorView> out) {
  const RecurrentOperands<T> operands = recurrent_operands<T>(g, in);
  const int64_t dirs = g.cell.directions, gh = g.gated(), state = dirs * g.batch * g.hidden;
  RecurrentGrads grads{std::vector<double>(g.steps * g.batch * g.input, 0.0),
                       std::vector<double>(dirs * gh * g.input, 0.0),
                       std::vector<double>(dirs * gh * g.hidden, 0.0),
                       std::vector<double>(dirs * 2 * gh, 0.0),
                       std::vector<double>(state, 0.0),
                       std::vector<double>(state, 0.0),
                       std::vector<double>(dirs * 3 * g.hidden, 0.0)};
  for (int64_t d = 0; d < dirs; ++d) backward_direction<T>(g, operands, in, d, grads);
  const std::vector<double>* by_output[] = {&grads.dx,  &grads.dw,  &grads.dr, &grads.db,
                                            &grads.dh0, &grads.dc0, &grads.dp};
  for (size_t k = 0; k < out.size() && k < std::size(by_output); ++k) {
    if (!has_view(out, k)) continue;
    T* o = out[k].as<T>();
    const std::vector<double>& values = *by_output[k];
    for (size_t i = 0; i < values.size(); ++i) o[i] = static_cast<T>(values[i]);
  }
}

std::unique_ptr<Kernel> make_recurrent_grad(const KernelSpec& spec) {
  const auto checked = check_recurrent(spec, /*backward=*/true);
  const RecurrentGeometry g = checked.geometry;
  return make_float_kernel(spec, checked.dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { recurrent_grad<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_recurrent_grad_kernel(KernelRegistry& registry) {
  registry.add(reference_training_entry("RecurrentGrad", kFloatDTypes, &make_recurrent_grad));
}

}  // namespace onnxtrain
