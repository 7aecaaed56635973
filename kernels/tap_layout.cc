#include "kernels/tap_layout.h"

#include <cstring>

#include "kernels/cpu/cpu_common.h"

namespace onnxtrain {

// Rows go in blocks that stay in the cache between the zeroing and the taps' writes.
template <typename T>
void scatter_taps(const T* from, T* to, int64_t rows, int64_t plane, const std::vector<int64_t>& offsets) {
  const auto taps = static_cast<int64_t>(offsets.size());
  constexpr int64_t kBlockElements = 8192;
  const int64_t block_rows = kBlockElements / plane + 1;
  cpu::parallel_for(rows, block_rows, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; b += block_rows) {
      const int64_t e = std::min(end, b + block_rows);
      std::memset(to + b * plane, 0, static_cast<size_t>((e - b) * plane) * sizeof(T));
      for (int64_t r = b; r < e; ++r)
        for (int64_t t = 0; t < taps; ++t) to[r * plane + offsets[t]] = from[r * taps + t];
    }
  });
}
template void scatter_taps(const float*, float*, int64_t, int64_t, const std::vector<int64_t>&);
template void scatter_taps(const uint16_t*, uint16_t*, int64_t, int64_t, const std::vector<int64_t>&);

void expand_taps(const TapLayout& layout, const float* taps, float* full, bool add) {
  const int64_t plane = layout.plane, count = layout.taps();
  if (!add) {
    if (count == plane) {  // every position is a tap, in order
      std::memcpy(full, taps, static_cast<size_t>(layout.elements()) * sizeof(float));
    } else {
      scatter_taps(taps, full, layout.rows, plane, layout.offsets);
    }
    return;
  }
  cpu::parallel_for(layout.rows, 8192 / plane + 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t t = 0; t < count; ++t) full[r * plane + layout.offsets[t]] += taps[r * count + t];
  });
}

}  // namespace onnxtrain
