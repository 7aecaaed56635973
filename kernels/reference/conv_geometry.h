// The sizes a Conv reference kernel loops over, read and checked once for the forward Conv and its
// backward ConvGrad: X (N,C,D1..Dn), W (M,C/group,k1..kn) and the output-shaped tensor (Y or dY,
// (N,M,O1..On)), with group, kernel_shape and the window attributes (strides, pads, dilations).
//
//   ConvGeometry g = read_conv_geometry(spec, x, weight, y, "Y");   // fails naming the op and node
#pragma once

#include <string>
#include <vector>

#include "kernels/reference/kernel_plumbing.h"
#include "kernels/reference/window.h"

namespace onnxtrain::reference {

struct ConvGeometry {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  WindowGeometry window;  // input = X's spatial sizes, output = Y's (dY's)
};

inline ConvGeometry read_conv_geometry(const KernelSpec& spec, const TensorDesc& x, const TensorDesc& weight,
                                       const TensorDesc& out, const std::string& out_label) {
  const std::vector<int64_t> in_spatial = spatial_sizes(spec, x, "X");
  if (weight.sizes.size() != x.sizes.size() || out.sizes.size() != x.sizes.size()) {
    kernel_fail(spec, "X " + sizes_to_string(x.sizes) + ", W " + sizes_to_string(weight.sizes) + " and " + out_label +
                          " " + sizes_to_string(out.sizes) + " must have the same rank");
  }
  ConvGeometry g;
  g.batch = x.sizes[0];
  g.in_channels = x.sizes[1];
  g.out_channels = weight.sizes[0];
  g.group = spec.attributes.get_int("group", 1);
  if (g.group < 1) kernel_fail(spec, "group must be >= 1, got " + std::to_string(g.group));
  if (weight.sizes[1] * g.group != g.in_channels || g.out_channels % g.group != 0) {
    kernel_fail(spec, "W " + sizes_to_string(weight.sizes) + " does not fit X " + sizes_to_string(x.sizes) +
                          " with group=" + std::to_string(g.group));
  }
  if (out.sizes[0] != g.batch || out.sizes[1] != g.out_channels) {
    kernel_fail(spec, out_label + " " + sizes_to_string(out.sizes) + " must be (N, M, ...) for X " +
                          sizes_to_string(x.sizes) + " and W " + sizes_to_string(weight.sizes));
  }
  const std::vector<int64_t> kernel(weight.sizes.begin() + 2, weight.sizes.end());
  if (spec.attributes.has("kernel_shape") && spec.attributes.get_ints("kernel_shape") != kernel) {
    kernel_fail(spec, "kernel_shape " + sizes_to_string(spec.attributes.get_ints("kernel_shape")) +
                          " does not match W " + sizes_to_string(weight.sizes));
  }
  g.window = read_window_geometry(spec, in_spatial, {out.sizes.begin() + 2, out.sizes.end()}, kernel);
  return g;
}

}  // namespace onnxtrain::reference
