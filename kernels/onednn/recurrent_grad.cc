// RecurrentGrad in float32 on the CPU: per direction, the forward's tape (its reserve), then back through
// time. Each step turns the state's gradient into the gates' pre-activation gradients (dGx on the X·Wᵀ
// side, dGh on the H·Rᵀ side: they differ in GRU's h gate only) and the previous state's gradient (one
// product by R); dX, dW, dR and dB are products over all steps once the loop is done (recurrent_steps.h).
// The equations are the reference kernel's (kernels/reference/recurrent_grad.cc).
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/recurrent_steps.h"
#include "kernels/scratch_arena.h"

namespace onnxtrain {
namespace {

using namespace onednn::recurrent;
namespace ref = reference;

class RecurrentGradKernel final : public Kernel {
 public:
  explicit RecurrentGradKernel(RecurrentGeometry g) : g_(std::move(g)) {}

  void run(Stream&, std::span<const TensorView> in, std::span<const TensorView> out) override {
    const Operands operands = ref::recurrent_operands<float>(g_, in);
    auto output = [&](size_t k) { return ref::has_view(out, k) ? out[k].as<float>() : nullptr; };
    for (int64_t d = 0; d < g_.cell.directions; ++d) direction(operands, in, d, output);
  }

 private:
  template <typename Output>
  void direction(const Operands& in, std::span<const TensorView> views, int64_t d, Output& output) const {
    const Tape tape = tape_of(g_, d, views[ref::kRecReserve].as<float>());  // read only
    const int64_t n_rows = g_.batch, hs = g_.hidden, gh = g_.gated(), steps = g_.steps, rows = steps * n_rows;
    const RecurrentCellKind kind = g_.cell.kind;
    const bool gru = kind == RecurrentCellKind::Gru, lbr = g_.cell.linear_before_reset;
    const int64_t recurrent_cols = gru && !lbr ? 2 * hs : gh;  // as the forward's first product
    const float* r = in.r + d * gh * hs;
    const float* p = in.p ? in.p + d * 3 * hs : nullptr;
    auto view = [&](size_t i) { return ref::has_view(views, i) ? views[i].as<const float>() : nullptr; };
    const float *dy = view(ref::kRecDY), *dy_h = view(ref::kRecDYh), *dy_c = view(ref::kRecDYc);
    // LSTM's peepholes i, o, f, summed per block of rows (for_row_blocks), then over the blocks.
    std::vector<float> dp(static_cast<size_t>(3 * hs * n_rows), 0.0f);
    // The gates' gradients of every step, by X's rows (dgx) and by step rows (dgh); rows past a sequence's
    // length stay zero.
    ScratchArena::Lease lease;
    float* dgx = lease.take<float>(static_cast<size_t>(rows * gh));
    float* dgh = lease.take<float>(static_cast<size_t>(rows * gh));
    if (has_shorter_rows(g_, in)) std::fill_n(dgx, rows * gh, 0.0f), std::fill_n(dgh, rows * gh, 0.0f);
    std::vector<float> dh(static_cast<size_t>(n_rows * hs), 0.0f), dc(dh.size(), 0.0f), dhp(dh.size());
    std::vector<float> step(static_cast<size_t>(n_rows * gh)), d_reset_h(dh.size());
    // LSTM: tanh of the step's cell state, for a block's rows in one call (per row it cost more than the
    // products at 16 units).
    std::vector<float> tanh_c(kind == RecurrentCellKind::Lstm ? dh.size() : 0);
    for (int64_t n = 0; n < n_rows; ++n) {
      if (dy_h) std::copy_n(dy_h + g_.state_row(d, n), hs, dh.begin() + n * hs);
      if (dy_c) std::copy_n(dy_c + g_.state_row(d, n), hs, dc.begin() + n * hs);
    }
    for_row_blocks(n_rows, [&](int64_t block, int64_t first, int64_t end) {
      for (int64_t s = steps - 1; s >= 0; --s) {
        const int64_t t = g_.time_of(d, s);
        std::fill(step.begin() + first * gh, step.begin() + end * gh, 0.0f);
        float* dgh_step = dgh + s * n_rows * gh;
        if (!tanh_c.empty()) {
          std::copy_n(tape.second + (s * n_rows + first) * hs, (end - first) * hs, tanh_c.begin() + first * hs);
          tanh_in_place(tanh_c.data() + first * hs, (end - first) * hs);
        }
        for (int64_t n = first; n < end; ++n) {
          float* dhn = dh.data() + n * hs;
          float* direct = dhp.data() + n * hs;  // the previous state's gradient but for the product by R
          if (t >= in.lengths[n]) {             // past the row's length: the state passed through
            std::copy_n(dhn, hs, direct);
            continue;
          }
          if (dy) {
            const float* dyr = dy + g_.y_row(t, d, n);
            for (int64_t j = 0; j < hs; ++j) dhn[j] += dyr[j];
          }
          const size_t row = static_cast<size_t>(s * n_rows + n);
          const float* a = tape.gates + row * gh;
          const float* hp = tape.h_prev + row * hs;
          float* gx = step.data() + n * gh;
          float* gh_row = dgh_step + n * gh;
          std::fill_n(direct, hs, 0.0f);
          if (kind == RecurrentCellKind::Rnn) {
            for (int64_t j = 0; j < hs; ++j)
              gx[j] = dhn[j] * (g_.cell.relu ? (a[j] > 0.0f ? 1.0f : 0.0f) : 1.0f - a[j] * a[j]);
          } else if (kind == RecurrentCellKind::Lstm) {
            lstm_row_grad(a, tape.first + row * hs, tape.second + row * hs, tanh_c.data() + n * hs, p, dhn,
                          dc.data() + n * hs, gx, dp.data() + block * 3 * hs);
          } else {
            for (int64_t j = 0; j < hs; ++j) {
              const float z = a[j], cand = a[2 * hs + j];
              gx[j] = dhn[j] * (hp[j] - cand) * z * (1.0f - z);
              gx[2 * hs + j] = dhn[j] * (1.0f - z) * (1.0f - cand * cand);
              direct[j] = dhn[j] * z;
              if (lbr) gx[hs + j] = gx[2 * hs + j] * tape.first[row * hs + j];  // dr, activated below
            }
          }
          std::copy_n(gx, gh, gh_row);
          if (gru && lbr) {
            for (int64_t j = 0; j < hs; ++j) {
              gh_row[2 * hs + j] = gx[2 * hs + j] * a[hs + j];
              gx[hs + j] *= a[hs + j] * (1.0f - a[hs + j]);
              gh_row[hs + j] = gx[hs + j];
            }
          }
        }
        if (gru && !lbr)
          reset_gate_grads(tape, s, t, in, r, first, end, step.data(), dgh_step, d_reset_h.data(), dhp.data());
        // dH_prev = direct + dGh·R (over the columns the forward's first product had).
        product(false, false, end - first, hs, recurrent_cols, dgh_step + first * gh, gh, r, hs, 1.0f,
                dhp.data() + first * hs, hs);
        for (int64_t n = first; n < end; ++n) {
          if (t < in.lengths[n]) std::copy_n(step.begin() + n * gh, gh, dgx + g_.x_row_index(t, n) * gh);
        }
        std::copy(dhp.begin() + first * hs, dhp.begin() + end * hs, dh.begin() + first * hs);
      }
    });
    weight_products(in, d, tape, dgx, dgh, output);
    if (float* dp_out = output(6)) {
      for (int64_t j = 0; j < 3 * hs; ++j) {
        float sum = 0.0f;
        for (int64_t block = 0; block < n_rows; ++block) sum += dp[block * 3 * hs + j];
        dp_out[d * 3 * hs + j] = sum;
      }
    }
    for (int64_t n = 0; n < n_rows; ++n) {
      if (float* dh0 = output(4)) std::copy_n(dh.begin() + n * hs, hs, dh0 + g_.state_row(d, n));
      if (float* dc0 = output(5)) std::copy_n(dc.begin() + n * hs, hs, dc0 + g_.state_row(d, n));
    }
  }

  // LSTM's row: dh (the state's gradient) and dc (the cell's, replaced by the previous cell's) into gx; tc is
  // tanh(cc).
  void lstm_row_grad(const float* a, const float* cp, const float* cc, const float* tc, const float* p, const float* dh,
                     float* dc, float* gx, float* dp) const {
    const int64_t hs = g_.hidden;
    for (int64_t j = 0; j < hs; ++j) {
      const float ig = a[j], og = a[hs + j], fg = a[2 * hs + j], cand = a[3 * hs + j];
      const float dpo = dh[j] * tc[j] * og * (1.0f - og);
      float dct = dc[j] + dh[j] * og * (1.0f - tc[j] * tc[j]);
      if (p) dct += dpo * p[hs + j], dp[hs + j] += dpo * cc[j];
      const float dpi = dct * cand * ig * (1.0f - ig), dpf = dct * cp[j] * fg * (1.0f - fg);
      gx[j] = dpi, gx[hs + j] = dpo, gx[2 * hs + j] = dpf, gx[3 * hs + j] = dct * ig * (1.0f - cand * cand);
      dc[j] = dct * fg;
      if (p) {
        dc[j] += dpi * p[j] + dpf * p[2 * hs + j];
        dp[j] += dpi * cp[j], dp[2 * hs + j] += dpf * cp[j];
      }
    }
  }

  // GRU without linear_before_reset: the h gate's product read r ⊙ H, so d(r ⊙ H) = dGh_h·Rh splits into r's
  // gradient (then through its sigmoid) and a part of the previous state's (added to dhp).
  void reset_gate_grads(const Tape& tape, int64_t s, int64_t t, const Operands& in, const float* r, int64_t first,
                        int64_t end, float* step, float* dgh_step, float* d_reset_h, float* dhp) const {
    const int64_t n_rows = g_.batch, hs = g_.hidden, gh = g_.gated();
    product(false, false, end - first, hs, hs, step + first * gh + 2 * hs, gh, r + 2 * hs * hs, hs, 0.0f,
            d_reset_h + first * hs, hs);
    for (int64_t n = first; n < end; ++n) {
      if (t >= in.lengths[n]) continue;
      const size_t row = static_cast<size_t>(s * n_rows + n);
      const float* a = tape.gates + row * gh;
      const float* hp = tape.h_prev + row * hs;
      for (int64_t j = 0; j < hs; ++j) {
        const float rj = a[hs + j], d_rh = d_reset_h[n * hs + j];
        step[n * gh + hs + j] = d_rh * hp[j] * rj * (1.0f - rj);
        dgh_step[n * gh + hs + j] = step[n * gh + hs + j];
        dhp[n * hs + j] += d_rh * rj;
      }
    }
  }

  // dX += dGx·W, dW = dGxᵀ·X, dR = dGhᵀ·H_prev (GRU's h rows without linear_before_reset: ·(r ⊙ H_prev)),
  // dB = the column sums of dGx and dGh.
  template <typename Output>
  void weight_products(const Operands& in, int64_t d, const Tape& tape, const float* dgx, const float* dgh,
                       Output& output) const {
    const int64_t hs = g_.hidden, gh = g_.gated(), is = g_.input, rows = g_.steps * g_.batch;
    const bool reset_first = g_.cell.kind == RecurrentCellKind::Gru && !g_.cell.linear_before_reset;
    if (float* dx = output(0))
      product(false, false, rows, is, gh, dgx, gh, in.w + d * gh * is, is, d ? 1.0f : 0.0f, dx, is);
    if (float* dw = output(1)) product(true, false, gh, is, rows, dgx, gh, in.x, is, 0.0f, dw + d * gh * is, is);
    if (float* dr = output(2)) {
      dr += d * gh * hs;
      const int64_t plain = reset_first ? 2 * hs : gh;
      product(true, false, plain, hs, rows, dgh, gh, tape.h_prev, hs, 0.0f, dr, hs);
      if (reset_first) {
        product(true, false, hs, hs, rows, dgh + 2 * hs, gh, tape.first, hs, 0.0f, dr + 2 * hs * hs, hs);
      }
    }
    if (float* db = output(3)) {
      db += d * 2 * gh;
      std::fill_n(db, 2 * gh, 0.0f);
      for (int64_t row = 0; row < rows; ++row) {
        for (int64_t q = 0; q < gh; ++q) db[q] += dgx[row * gh + q], db[gh + q] += dgh[row * gh + q];
      }
    }
  }

  RecurrentGeometry g_;
};

std::unique_ptr<Kernel> make_onednn_recurrent_grad(const KernelSpec& spec) {
  const auto checked = reference::check_recurrent(spec, /*backward=*/true);
  if (checked.dtype != DType::Float32) reference::kernel_fail(spec, "the oneDNN kernel runs float32 only");
  return std::make_unique<RecurrentGradKernel>(checked.geometry);
}

}  // namespace

void register_onednn_recurrent_grad_kernel(KernelRegistry& registry) {
  registry.add(onednn::training_entry("RecurrentGrad", &make_onednn_recurrent_grad));
}

}  // namespace onnxtrain
