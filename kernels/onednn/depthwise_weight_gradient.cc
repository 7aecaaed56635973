// The weight gradient of a depthwise convolution over a small plane (depthwise_weight_gradient.h).
#include "kernels/onednn/depthwise_weight_gradient.h"

#include <algorithm>

namespace onnxtrain::onednn {

bool DepthwiseWeightGradient::applies(const KernelSpec& spec, const reference::WindowGeometry& window) {
  if (spec.inputs.size() < 3 || window.spatial() != 2) return false;
  const std::vector<int64_t>& x = spec.inputs[1].sizes;
  const std::vector<int64_t>& w = spec.inputs[2].sizes;
  const int64_t group = spec.attributes.get_int("group", 1);
  const int64_t out_plane = window.output[0] * window.output[1];
  return spec.inputs[0].dtype == DType::Float32 && x.size() == 4 && group > 1 && group == x[1] && w[0] == x[1] &&
         w[1] == 1 && out_plane >= 1 && out_plane <= kMaxOutputPositions;
}

DepthwiseWeightGradient::DepthwiseWeightGradient(const KernelSpec& spec, const reference::WindowGeometry& window)
    : batch_(spec.inputs[1].sizes[0]),
      channels_(spec.inputs[1].sizes[1]),
      in_plane_(window.input[0] * window.input[1]),
      out_plane_(window.output[0] * window.output[1]),
      taps_(window.kernel[0] * window.kernel[1]) {
  for (int64_t oy = 0; oy < window.output[0]; ++oy)
    for (int64_t ox = 0; ox < window.output[1]; ++ox)
      for (int64_t ky = 0; ky < window.kernel[0]; ++ky)
        for (int64_t kx = 0; kx < window.kernel[1]; ++kx) {
          const int64_t iy = window.input_position(0, oy, ky), ix = window.input_position(1, ox, kx);
          if (iy < 0 || iy >= window.input[0] || ix < 0 || ix >= window.input[1]) continue;
          pairs_.push_back({oy * window.output[1] + ox, iy * window.input[1] + ix, ky * window.kernel[1] + kx});
        }
}

void DepthwiseWeightGradient::run(const float* dy, const float* x, float* dw) const {
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < channels_; ++c) {
    float* sums = dw + c * taps_;
    std::fill(sums, sums + taps_, 0.0f);
    for (int64_t n = 0; n < batch_; ++n) {
      const float* g = dy + (n * channels_ + c) * out_plane_;
      const float* v = x + (n * channels_ + c) * in_plane_;
      for (const Pair& p : pairs_) sums[p.tap] += g[p.out] * v[p.in];
    }
  }
}

}  // namespace onnxtrain::onednn
