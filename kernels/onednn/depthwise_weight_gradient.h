// The weight gradient of a depthwise convolution (group = C = M, W (C, 1, k...)) over a small output plane,
// on the plain NCHW layout without oneDNN. For MobileNetV2's late 3x3 depthwise layers at 32x32 input
// (a 2x2 plane, 384 and 576 channels, batch 32) oneDNN's own weight gradient took 4.1 ms over blocked data
// (im2col and a GEMM per channel) and 1.2 / 0.6 ms over channels-last (its depthwise kernel, after
// reordering X and dY), where the work is 16 multiply-adds per sample and channel: over a 2x2 plane with
// pads 1, 20 of a 3x3 kernel's 36 (tap, position) pairs fall in the padding. Here each channel runs the
// live pairs only, listed once at prepare time:
//   dW[c][t] = sum over n and the pairs (p, q) of tap t of dY[n][c][p] · X[n][c][q]
// with the channels split over the threads (each sums its own channels in a fixed order: the result does
// not depend on the thread count).
//
//   if (DepthwiseWeightGradient::applies(spec, window)) gradient.emplace(spec, window);
//   gradient->run(dy, x, dw);
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/reference/window.h"

namespace onnxtrain::onednn {

class DepthwiseWeightGradient {
 public:
  // The largest output plane this takes (the planes where oneDNN ran im2col and GEMMs).
  static constexpr int64_t kMaxOutputPositions = 4;

  // Whether a float32 ConvGrad spec (dY, X, W) with `window` is a 2-D depthwise convolution with a
  // multiplier of 1 over an output plane of at most kMaxOutputPositions positions.
  static bool applies(const KernelSpec& spec, const reference::WindowGeometry& window);

  DepthwiseWeightGradient(const KernelSpec& spec, const reference::WindowGeometry& window);
  // dw (C, 1, k...) from dy (N, C, out...) and x (N, C, in...), all plain.
  void run(const float* dy, const float* x, float* dw) const;

 private:
  struct Pair {
    int64_t out = 0, in = 0, tap = 0;  // positions within a plane, and the kernel tap
  };
  std::vector<Pair> pairs_;  // every (output position, tap) whose input position lies inside the input
  int64_t batch_ = 0, channels_ = 0, in_plane_ = 0, out_plane_ = 0, taps_ = 0;
};

}  // namespace onnxtrain::onednn
