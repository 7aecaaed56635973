// Where oneDNN's Winograd convolution pays (winograd.h).
#include "kernels/onednn/winograd.h"

namespace onnxtrain::onednn {

int64_t winograd_least_work() {
  static const int64_t least = [] {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();  // GCC: before __builtin_cpu_is where a static initialiser may run first
    if (__builtin_cpu_is("intel")) return int64_t{1} << 18;
#endif
    return int64_t{1} << 16;
  }();
  return least;
}

bool winograd_pays(const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                   const reference::WindowGeometry& window, int64_t group) {
  constexpr int64_t kLeastChannels = 32, kLeastSide = 8;
  if (group != 1 || x.size() != 4 || w.size() != 4 || window.spatial() != 2) return false;
  if (x[1] < kLeastChannels || w[0] < kLeastChannels) return false;
  for (size_t a = 0; a < 2; ++a) {
    if (window.kernel[a] != 3 || window.strides[a] != 1 || window.dilations[a] != 1 || window.output[a] < kLeastSide)
      return false;
  }
  // The 4x4 output tiles times the channel pairs: the transforms' work against the products'.
  const int64_t tiles = x[0] * ((window.output[0] + 3) / 4) * ((window.output[1] + 3) / 4);
  return tiles * x[1] * w[0] >= winograd_least_work();
}

}  // namespace onnxtrain::onednn
