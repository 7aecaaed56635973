// What the windowed pooling reference kernels forward (pooling.cc: MaxPool, AveragePool) and backward
// (pooling_grad.cc: MaxPoolGrad, AveragePoolGrad) share: the pool's geometry read from its unpooled
// (N,C,D...) and pooled (N,C,d...) tensors, count_include_pad, and the walk over one window's elements.
//
//   const TensorDesc& x = require_input(spec, 0, "X");
//   PoolGeometry g = read_pool_geometry(spec, x, "X", require_output(spec, 0, "Y"), "Y");
//   for_each_window_element(g.window, out_pos, k, [&](int64_t offset, bool inside, bool padded) { ... });
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/kernel_plumbing.h"
#include "kernels/reference/window.h"

namespace onnxtrain::reference {

struct PoolGeometry {
  int64_t planes = 0;  // N·C
  WindowGeometry window;
  bool count_include_pad = false;
  bool column_major_indices = false;  // MaxPool's Indices (storage_order 1)
};

// The geometry of a pool whose input is `unpooled` and output `pooled`; fails naming them unless both
// are (N,C,...) alike with at least one spatial dim, or when kernel_shape is missing.
inline PoolGeometry read_pool_geometry(const KernelSpec& spec, const TensorDesc& unpooled,
                                       const std::string& unpooled_name, const TensorDesc& pooled,
                                       const std::string& pooled_name) {
  const std::vector<int64_t> in_spatial = spatial_sizes(spec, unpooled, unpooled_name);
  const std::vector<int64_t>& u = unpooled.sizes;
  const std::vector<int64_t>& p = pooled.sizes;
  if (p.size() != u.size() || p[0] != u[0] || p[1] != u[1]) {
    kernel_fail(spec, pooled_name + " " + sizes_to_string(p) + " must be (N,C,...) like " + unpooled_name + " " +
                          sizes_to_string(u));
  }
  if (!spec.attributes.has("kernel_shape")) kernel_fail(spec, "the kernel_shape attribute is required");
  PoolGeometry g;
  g.planes = u[0] * u[1];
  g.window = read_window_geometry(spec, in_spatial, {p.begin() + 2, p.end()}, spec.attributes.get_ints("kernel_shape"));
  return g;
}

// AveragePool's count_include_pad attribute (0 or 1).
inline bool read_count_include_pad(const KernelSpec& spec) {
  const int64_t count_include_pad = spec.attributes.get_int("count_include_pad", 0);
  if (count_include_pad != 0 && count_include_pad != 1) {
    kernel_fail(spec, "count_include_pad must be 0 or 1, got " + std::to_string(count_include_pad));
  }
  return count_include_pad == 1;
}

// Calls visit(input_offset, inside_input, inside_padded_input) for every element of the window of
// output position `out_pos`, in window order; input_offset is row major within the plane and only
// meaningful when inside. `k` is scratch of w.spatial() elements.
template <typename Visit>
void for_each_window_element(const WindowGeometry& w, const std::vector<int64_t>& out_pos, std::vector<int64_t>& k,
                             Visit&& visit) {
  std::fill(k.begin(), k.end(), 0);
  do {
    int64_t offset = 0;
    bool inside = true, padded = true;
    for (size_t d = 0; d < w.spatial(); ++d) {
      const int64_t p = w.input_position(d, out_pos[d], k[d]);
      inside = inside && p >= 0 && p < w.input[d];
      padded = padded && p >= -w.pad_begin[d] && p < w.input[d] + w.pad_end[d];
      offset = offset * w.input[d] + p;
    }
    visit(offset, inside, padded);
  } while (next_index(k, w.kernel));
}

}  // namespace onnxtrain::reference
