// A tensor that is zero except at the same positions of every row: a convolution's weight gradient
// (M·C rows of a kernel plane) where only some taps read the input (ResNet-18's layer4 at 32x32: the
// centre of each 3x3 kernel, one element in nine). A kernel that sums such an output over runs keeps only
// the taps (Stream::OutputSum), and the session writes the full tensor once; a data-parallel sum adds
// replicas' taps without reading the zeros (executor/replica_gradient_sum.h).
//
//   TapLayout layout{.rows = m * c, .plane = 9, .offsets = {4}};   // taps: rows × 1 floats
//   expand_taps(layout, taps, dw, /*add=*/false);                  // dw: rows × 9, zero but the centres
#pragma once

#include <cstdint>
#include <vector>

namespace onnxtrain {

struct TapLayout {
  int64_t rows = 0, plane = 0;
  std::vector<int64_t> offsets;  // in a row's plane, increasing; element r·plane + offsets[t] is tap t of row r

  int64_t taps() const { return static_cast<int64_t>(offsets.size()); }
  int64_t elements() const { return rows * plane; }  // of the full tensor
};

// The full tensor (rows × plane) from the taps (rows × taps): written, zero elsewhere, or added at the taps.
void expand_taps(const TapLayout& layout, const float* taps, float* full, bool add);

// to[r·plane + offsets[t]] = from[r·offsets.size() + t] for rows [0, rows), zero elsewhere, split over the
// threads: expand_taps's write, for any 4- or 2-byte element (T float, or uint16_t for bfloat16).
template <typename T>
void scatter_taps(const T* from, T* to, int64_t rows, int64_t plane, const std::vector<int64_t>& offsets);

}  // namespace onnxtrain
