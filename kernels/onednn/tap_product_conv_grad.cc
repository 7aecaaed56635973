// The tap-product convolution's ConvGrad (tap_product_conv.h), with dY' the position-major transpose of dY:
//   dX'[in(p, t)] += dY'[p] · W'[t]^T,   dW'[t] = sum over its runs of X'[in(p, t)]^T · dY'[p],
//   dB[m] = sum over n and p of dY[n][m][p],
// then dX and dW transposed back. dX is zero at the positions no tap reads, dW at the taps that read only
// padding. W' is the one the forward convolution of the same run made, where the stream kept it.
#include <algorithm>
#include <optional>

#include "kernels/cpu/cpu_common.h"
#include "kernels/onednn/deferred_products.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/reference_fallback.h"
#include "kernels/onednn/tap_product_conv.h"
#include "kernels/scratch_arena.h"

namespace onnxtrain::onednn {
namespace {

// dW'[t] = Σ over tap t's runs of X'[in]ᵀ·dY'[out], with n rows per position (xt, dyt position-major),
// written into dwt or added to it (`adds`); the taps that read only padding are written zero.
void tap_weight_products(const TapProductConv& g, int64_t n, const float* xt, const float* dyt, float* dwt, bool adds) {
  const int64_t c = g.in_channels, m = g.out_channels;
  std::vector<bool> written(static_cast<size_t>(g.kernel_plane), adds);
  for (const TapProductConv::Run& r : g.runs) {
    gemm(true, false, c, m, r.length * n, xt + r.in_begin * n * c, c, dyt + r.out_begin * n * m, m,
         written[r.tap] ? 1.0f : 0.0f, dwt + r.tap * c * m, m);
    written[r.tap] = true;
  }
  for (int64_t t = 0; t < g.kernel_plane; ++t)
    if (!written[t]) std::fill(dwt + t * c * m, dwt + (t + 1) * c * m, 0.0f);
}

// TapMajorConvGrad's dWt summed over runs as one set of products over all their rows (deferred_products.h).
struct DeferredTapWeightProducts final : Stream::DeferredProduct {
  explicit DeferredTapWeightProducts(const TapProductConv& g)
      : g(g), xt(g.in_plane, g.in_channels), dyt(g.out_plane, g.out_channels) {}
  void finish(float* out, bool adds) override {
    tap_weight_products(g, xt.rows(), xt.packed(), dyt.packed(), out, adds);
  }

  TapProductConv g;
  StagedRows xt, dyt;
};

class TapProductConvGradKernel final : public Kernel, public ReportsImplementation {
 public:
  // `tap_major`: input 2 is Wt and output 1 dWt (TapMajorConvGrad); no transposes.
  TapProductConvGradKernel(const KernelSpec& spec, TapProductConv g, bool tap_major = false)
      : spec_(spec), g_(std::move(g)) {
    for (size_t i = 0; i < 3; ++i) wanted_[i] = i < spec.outputs.size() && spec.outputs[i].present();
    // dWt is written in place, so it can be summed as one set of products over all runs' rows.
    defers_ = tap_major && worth_deferring(g_.weight_elements(),
                                           g_.batch * (g_.in_plane * g_.in_channels + g_.out_plane * g_.out_channels));
    if (!tap_major) {
      to_tap_major_.emplace(g_, true);
      from_tap_major_.emplace(g_, false);
      added_from_tap_major_.emplace(g_, false, /*adds=*/true);
    }
  }

  std::string library_implementation() const override {
    return "tap products (" + std::to_string(g_.runs.size()) + " sgemm per gradient)";
  }

  // dW: after the first run of a sum, the transpose back from tap-major adds instead of writing.
  bool sums_output(size_t index) const override { return index == 1; }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    checked(spec_, "run", [&] {
      const int64_t n = g_.batch, m = g_.out_channels;
      ScratchArena::Lease lease;
      const float* dy = inputs[0].as<const float>();
      float* dyt = take(lease, g_.out_plane * n * m);
      TapProductConv::to_positions(dy, dyt, n, m, g_.out_plane);
      if (wanted_[0]) input_gradient(dyt, inputs[2].as<const float>(), stream, outputs[0].as<float>(), lease);
      if (wanted_[1]) {
        Stream::OutputSum* sum = stream.output_sum(outputs[1].data);
        if (sum && defers_ && stream.defers_sums()) {
          stage_weight_gradient(*sum, dyt, inputs[1].as<const float>());
        } else {
          weight_gradient(dyt, inputs[1].as<const float>(), outputs[1].as<float>(), lease, sum && !sum->first);
        }
      }
      if (wanted_[2]) bias_gradient(dy, outputs[2].as<float>());
    });
  }

 private:
  // This run's X' and dY' into the sum's deferred products (made, or reused, at its first run).
  void stage_weight_gradient(Stream::OutputSum& sum, const float* dyt, const float* x) {
    DeferredTapWeightProducts& products = staging_for(
        sum, staging_, [&] { return std::make_shared<DeferredTapWeightProducts>(g_); },
        [](DeferredTapWeightProducts& p) {
          p.xt.clear();
          p.dyt.clear();
        });
    const int64_t n = g_.batch;
    TapProductConv::to_positions(x, products.xt.add_run(n), n, g_.in_channels, g_.in_plane);
    const int64_t dy_elements = g_.out_plane * n * g_.out_channels;
    std::copy(dyt, dyt + dy_elements, products.dyt.add_run(n));
  }
  static float* take(ScratchArena::Lease& lease, int64_t elements) {
    return lease.take<float>(static_cast<size_t>(elements));
  }

  void input_gradient(const float* dyt, const float* w, const Stream& stream, float* dx, ScratchArena::Lease& lease) {
    const int64_t n = g_.batch, c = g_.in_channels, m = g_.out_channels;
    const float* wt = to_tap_major_ ? g_.tap_major_from_forward(w, *to_tap_major_, stream, lease) : w;
    float* dxt = take(lease, g_.in_plane * n * c);
    std::fill(dxt, dxt + g_.in_plane * n * c, 0.0f);
    for (const TapProductConv::Run& r : g_.runs)
      gemm(false, true, r.length * n, c, m, dyt + r.out_begin * n * m, m, wt + r.tap * c * m, m, 1.0f,
           dxt + r.in_begin * n * c, c);
    TapProductConv::to_plane(dxt, dx, n, c, g_.in_plane);
  }

  // dW' tap by tap, then transposed into dw (added to it when `adds`); written in place when the graph
  // holds Wt, where adding is the products' own beta.
  void weight_gradient(const float* dyt, const float* x, float* dw, ScratchArena::Lease& lease, bool adds) {
    const int64_t n = g_.batch;
    float* xt = take(lease, g_.in_plane * n * g_.in_channels);
    TapProductConv::to_positions(x, xt, n, g_.in_channels, g_.in_plane);
    const bool in_place = !from_tap_major_;
    float* dwt = in_place ? dw : take(lease, g_.weight_elements());
    tap_weight_products(g_, n, xt, dyt, dwt, in_place && adds);
    if (!in_place) (adds ? *added_from_tap_major_ : *from_tap_major_).run(dwt, dw);
  }

  void bias_gradient(const float* dy, float* db) const {
    const int64_t n = g_.batch, m = g_.out_channels, p = g_.out_plane;
    cpu::parallel_for(m, 64, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        float sum = 0.0f;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t q = 0; q < p; ++q) sum += dy[(i * m + k) * p + q];
        db[k] = sum;
      }
    });
  }

  KernelSpec spec_;
  TapProductConv g_;
  bool wanted_[3] = {false, false, false};
  bool defers_ = false;                                 // dW's sums may be deferred (DeferredTapWeightProducts)
  std::shared_ptr<DeferredTapWeightProducts> staging_;  // reused by the next sum once finished
  // None when the graph holds Wt.
  std::optional<TapProductConv::WeightTranspose> to_tap_major_, from_tap_major_, added_from_tap_major_;
};

}  // namespace

std::unique_ptr<Kernel> make_tap_product_conv_grad(const KernelSpec& spec, const reference::WindowGeometry& window) {
  // ConvGrad(dY, X, W) -> (dX, dW, dB)
  std::optional<TapProductConv> g = TapProductConv::for_spec(spec, 1, window);
  if (!g) return nullptr;
  return std::make_unique<TapProductConvGradKernel>(spec, std::move(*g));
}

std::unique_ptr<Kernel> make_tap_major_conv_grad(const KernelSpec& spec) {
  // TapMajorConvGrad(dY, X, Wt) -> (dX, dWt, dB)
  std::optional<TapProductConv> g = TapProductConv::for_spec(spec, 1, TapProductConv::tap_major_window(spec, 1), true);
  if (!g) return reference_kernel(spec);
  return std::make_unique<TapProductConvGradKernel>(spec, std::move(*g), /*tap_major=*/true);
}

}  // namespace onnxtrain::onednn
