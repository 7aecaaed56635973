// What the "cpu" MaxPool (max_pool.cc) and MaxPoolGrad (max_pool_grad.cc) share: the pool's window as
// three spatial axes (1-D and 2-D pools get leading axes of size 1) and the search of a window for its
// first maximal element, in window order, as the reference kernels pick it: the forward takes its value,
// the backward adds dY there. oneDNN's pooling on plain NCHW tensors is its scalar simple_nchw code
// (4.2 ms for the Fashion-MNIST CNN's first pool at batch 64, 81% of the step with the backward); these
// loop over each (n, c) plane with the window's range clipped to the input once per axis.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "kernels/reference/window.h"

namespace onnxtrain::cpu {

struct MaxPoolWindow {
  std::array<int64_t, 3> input{1, 1, 1}, output{1, 1, 1}, kernel{1, 1, 1};
  std::array<int64_t, 3> stride{1, 1, 1}, dilation{1, 1, 1}, pad_begin{0, 0, 0};
  int64_t in_plane() const { return input[0] * input[1] * input[2]; }
  int64_t out_plane() const { return output[0] * output[1] * output[2]; }

  // From the reference geometry of a pool with 1 to 3 spatial axes (false for more).
  static bool of(const reference::WindowGeometry& w, MaxPoolWindow& out) {
    const size_t n = w.spatial();
    if (n < 1 || n > 3) return false;
    for (size_t d = 0; d < n; ++d) {
      const size_t a = 3 - n + d;
      out.input[a] = w.input[d], out.output[a] = w.output[d], out.kernel[a] = w.kernel[d];
      out.stride[a] = w.strides[d], out.dilation[a] = w.dilations[d], out.pad_begin[a] = w.pad_begin[d];
    }
    out.compute_ranges();
    return true;
  }

  // Per axis and output position: the input position of the window's start and the kernel positions
  // [first, last) that fall inside the input, computed once (prepare), not per output element.
  struct AxisRange {
    int64_t start, first, last;
  };
  std::array<std::vector<AxisRange>, 3> ranges;

  void compute_ranges() {
    for (int a = 0; a < 3; ++a) {
      ranges[a].clear();
      for (int64_t o = 0; o < output[a]; ++o) {
        const int64_t start = o * stride[a] - pad_begin[a], step = dilation[a];
        const int64_t first = start >= 0 ? 0 : (-start + step - 1) / step;
        const int64_t last = std::min(kernel[a], input[a] - start > 0 ? (input[a] - start + step - 1) / step : 0);
        ranges[a].push_back({start, first, std::max(first, last)});
      }
    }
  }

  // Calls visit(output offset, input offset of the window's first maximal element, or -1 for a window
  // wholly in the padding) for every output position of the plane `x`, in row-major order. The common
  // 2x2 window of stride 2 inside the input (CNNs' pools) takes the four elements directly.
  // A 2-D pool of 2x2 windows, stride 2, every window inside the input.
  bool two_by_two() const {
    return input[0] == 1 && kernel[0] == 1 && kernel[1] == 2 && kernel[2] == 2 && stride[1] == 2 && stride[2] == 2 &&
           dilation[1] == 1 && dilation[2] == 1 && pad_begin[1] == 0 && pad_begin[2] == 0 &&
           2 * output[1] <= input[1] && 2 * output[2] <= input[2];
  }

  template <typename Visit>
  void for_each_argmax(const float* x, Visit&& visit) const {
    if (two_by_two()) {
      const int64_t w = input[2];
      for (int64_t oh = 0, o = 0; oh < output[1]; ++oh)
        for (int64_t ow = 0; ow < output[2]; ++ow, ++o) {
          int64_t best = 2 * oh * w + 2 * ow;  // the window's elements in window order: a b / c d
          if (x[best + 1] > x[best]) best = best + 1;
          if (x[2 * oh * w + w + 2 * ow] > x[best]) best = 2 * oh * w + w + 2 * ow;
          if (x[2 * oh * w + w + 2 * ow + 1] > x[best]) best = 2 * oh * w + w + 2 * ow + 1;
          visit(o, best);
        }
      return;
    }
    int64_t o = 0;
    for (const AxisRange& d : ranges[0])
      for (const AxisRange& h : ranges[1])
        for (const AxisRange& wr : ranges[2]) {
          int64_t best = -1;
          for (int64_t kd = d.first; kd < d.last; ++kd)
            for (int64_t kh = h.first; kh < h.last; ++kh) {
              const int64_t row = ((d.start + kd * dilation[0]) * input[1] + h.start + kh * dilation[1]) * input[2];
              for (int64_t kw = wr.first; kw < wr.last; ++kw) {
                const int64_t at = row + wr.start + kw * dilation[2];
                if (best < 0 || x[at] > x[best]) best = at;
              }
            }
          visit(o++, best);
        }
  }
};

}  // namespace onnxtrain::cpu
