// Where oneDNN's Winograd convolution pays (winograd.h).
#include "kernels/onednn/winograd.h"

namespace onnxtrain::onednn {

bool winograd_pays(const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                   const reference::WindowGeometry& window, int64_t group) {
  constexpr int64_t kLeastChannels = 32, kLeastSide = 8;
  if (group != 1 || x.size() != 4 || w.size() != 4 || window.spatial() != 2) return false;
  if (x[1] < kLeastChannels || w[0] < kLeastChannels) return false;
  for (size_t a = 0; a < 2; ++a) {
    if (window.kernel[a] != 3 || window.strides[a] != 1 || window.dilations[a] != 1 ||
        window.output[a] < kLeastSide)
      return false;
  }
  return true;
}

}  // namespace onnxtrain::onednn
