#include "kernels/tap_layout.h"

#include <cstring>

#include "kernels/cpu/cpu_common.h"

namespace onnxtrain {

void expand_taps(const TapLayout& layout, const float* taps, float* full, bool add) {
  const int64_t plane = layout.plane, count = layout.taps();
  if (!add && count == plane) {  // every position is a tap, in order
    std::memcpy(full, taps, static_cast<size_t>(layout.elements()) * sizeof(float));
    return;
  }
  // Rows in blocks that stay in the cache between the zeroing and the taps' writes.
  const int64_t block_rows = 8192 / plane + 1;
  cpu::parallel_for(layout.rows, block_rows, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; b += block_rows) {
      const int64_t e = std::min(end, b + block_rows);
      if (!add) std::memset(full + b * plane, 0, static_cast<size_t>((e - b) * plane) * sizeof(float));
      for (int64_t r = b; r < e; ++r)
        for (int64_t t = 0; t < count; ++t) full[r * plane + layout.offsets[t]] += taps[r * count + t];
    }
  });
}

}  // namespace onnxtrain
