// Where Slice reads in a tensor of given sizes: a base offset and per-axis sizes and strides (in elements),
// from starts/ends/axes/steps with graph/shape.h's numpy_slice clamping (negative steps included). The
// Slice kernel (slice.cc) reads x through it and SliceGrad (slice_grad.cc) writes dY into dX through it.
//
//   SliceView v = slice_view(spec, x.sizes, starts, ends, axes, steps);  // fails naming the bad input
//   copy_strided(x, v.base, v.strides, y);                               // y has v.sizes
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/shape.h"
#include "kernels/reference/kernel_plumbing.h"

namespace onnxtrain::reference {

// Slice takes starts/ends/axes as attributes before opset 10 and as inputs (with steps) from it.
constexpr int kSliceInputsSince = 10;

struct SliceView {
  int64_t base = 0;
  std::vector<int64_t> sizes, strides;
};

inline SliceView slice_view(const KernelSpec& spec, const std::vector<int64_t>& sizes,
                            const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                            const std::vector<int64_t>& axes, const std::vector<int64_t>& steps) {
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    kernel_fail(spec, "starts " + sizes_to_string(starts) + ", ends " + sizes_to_string(ends) + ", axes " +
                          sizes_to_string(axes) + " and steps " + sizes_to_string(steps) +
                          " must have the same length");
  }
  const auto rank = static_cast<int64_t>(sizes.size());
  const std::vector<int64_t> in_strides = row_major_strides(sizes);
  SliceView v{0, sizes, in_strides};
  std::vector<bool> seen(rank, false);
  for (size_t j = 0; j < starts.size(); ++j) {
    const int64_t axis = normalized_axis(spec, axes[j], rank);
    if (seen[axis])
      kernel_fail(spec, "axis " + std::to_string(axes[j]) + " appears twice in axes " + sizes_to_string(axes));
    seen[axis] = true;
    if (steps[j] == 0) kernel_fail(spec, "step 0 on axis " + std::to_string(axes[j]) + " (steps must be non-zero)");
    const SliceExtent r = numpy_slice(starts[j], ends[j], steps[j], sizes[axis]);
    v.sizes[axis] = r.count;
    v.base += r.first * in_strides[axis];
    v.strides[axis] = r.count > 1 ? in_strides[axis] * steps[j] : 0;  // a huge step taking one element overflows
  }
  return v;
}

}  // namespace onnxtrain::reference
