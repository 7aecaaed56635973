// The tap-product convolution's ConvGrad (tap_product_conv.h), with dY' the position-major transpose of dY:
//   dX'[in(p, t)] += dY'[p] · W'[t]^T,   dW'[t] = sum over its runs of X'[in(p, t)]^T · dY'[p],
//   dB[m] = sum over n and p of dY[n][m][p],
// then dX and dW transposed back. dX is zero at the positions no tap reads, dW at the taps that read only
// padding. W' is the one the forward convolution of the same run made, where the stream kept it.
#include <algorithm>
#include <optional>

#include "kernels/cpu/cpu_common.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/reference_fallback.h"
#include "kernels/onednn/tap_product_conv.h"
#include "kernels/scratch_arena.h"

namespace onnxtrain::onednn {
namespace {

class TapProductConvGradKernel final : public Kernel, public ReportsImplementation {
 public:
  // `tap_major`: input 2 is Wt and output 1 dWt (TapMajorConvGrad); no transposes.
  TapProductConvGradKernel(const KernelSpec& spec, TapProductConv g, bool tap_major = false)
      : spec_(spec), g_(std::move(g)) {
    for (size_t i = 0; i < 3; ++i) wanted_[i] = i < spec.outputs.size() && spec.outputs[i].present();
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
      if (wanted_[1])
        weight_gradient(dyt, inputs[1].as<const float>(), outputs[1].as<float>(), lease, adds(stream, outputs[1].data));
      if (wanted_[2]) bias_gradient(dy, outputs[2].as<float>());
    });
  }

 private:
  static bool adds(const Stream& stream, const void* output) {
    const Stream::OutputSum* sum = stream.output_sum(output);
    return sum && !sum->first;
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
    const int64_t n = g_.batch, c = g_.in_channels, m = g_.out_channels;
    float* xt = take(lease, g_.in_plane * n * c);
    TapProductConv::to_positions(x, xt, n, c, g_.in_plane);
    const bool in_place = !from_tap_major_;
    float* dwt = in_place ? dw : take(lease, g_.weight_elements());
    std::vector<bool> written(static_cast<size_t>(g_.kernel_plane), in_place && adds);
    for (const TapProductConv::Run& r : g_.runs) {
      gemm(true, false, c, m, r.length * n, xt + r.in_begin * n * c, c, dyt + r.out_begin * n * m, m,
           written[r.tap] ? 1.0f : 0.0f, dwt + r.tap * c * m, m);
      written[r.tap] = true;
    }
    for (int64_t t = 0; t < g_.kernel_plane; ++t)
      if (!written[t]) std::fill(dwt + t * c * m, dwt + (t + 1) * c * m, 0.0f);  // a tap only in the padding
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
