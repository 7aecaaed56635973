// Sliding-window geometry of the reference Conv, ConvTranspose and pooling kernels: the strides,
// dilations and pads of each spatial axis, resolved at prepare time from the attributes (auto_pad
// included) and the fixed input and output sizes. Follows graph/ops/op_helpers.h read_window: explicit
// `pads` take precedence over auto_pad.
//
//   WindowGeometry w = read_window_geometry(spec, x_spatial, y_spatial, kernel);
//   int64_t in = w.input_position(axis, out_pos, k);  // may be outside [0, w.input[axis]): padding
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernel.h"

namespace onnxtrain::reference {

struct WindowGeometry {
  std::vector<int64_t> input, output, kernel;  // spatial sizes
  std::vector<int64_t> strides, dilations, pad_begin, pad_end;
  std::string auto_pad = "NOTSET";  // NOTSET (explicit pads), SAME_UPPER, SAME_LOWER or VALID

  size_t spatial() const { return input.size(); }
  // Where element k of the window of output position `out` falls on the input of `axis`.
  int64_t input_position(size_t axis, int64_t out, int64_t k) const {
    return out * strides[axis] - pad_begin[axis] + k * dilations[axis];
  }
};

// Reads strides, dilations, pads and auto_pad for kernel.size() spatial axes and resolves the pads of a
// forward window (Conv, pools): SAME pads total max(0, (out-1)·stride + dilated kernel - in), the odd one
// at the end (SAME_UPPER) or the beginning (SAME_LOWER). Fails on malformed attributes.
WindowGeometry read_window_geometry(const KernelSpec& spec, const std::vector<int64_t>& input,
                                    const std::vector<int64_t>& output, const std::vector<int64_t>& kernel);

// The spatial sizes (dims 2..) of an (N,C,D1..Dn) tensor; fails unless it has at least one spatial dim.
std::vector<int64_t> spatial_sizes(const KernelSpec& spec, const TensorDesc& desc, const std::string& what);

}  // namespace onnxtrain::reference
