// ConvTranspose, 1-D to 3-D: X (N,C,D1..Dn), W (C,M/group,k1..kn), optional B (M). Each input element
// scatters input·kernel into the output window it maps to. The output sizes are fixed by the caller
// (pads, output_padding or output_shape); only the leading pad decides where the windows land: explicit
// pads, or, with output_shape or auto_pad SAME, the spec's split of
//   total = stride·(in-1) + output_padding + dilated kernel - out
// into begin = total/2 (SAME_UPPER) or total - total/2 (otherwise), with floor division as ONNX's
// reference implementation uses, so an output larger than the full result grows at the end.
#include <algorithm>

#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"
#include "kernels/reference/window.h"

namespace onnxtrain {
namespace {

using namespace reference;

struct ConvTransposeGeometry {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  WindowGeometry window;  // input = X's spatial sizes, output = Y's
};

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

template <typename T>
void conv_transpose_forward(const ConvTransposeGeometry& g, std::span<const TensorView> inputs,
                            std::span<const TensorView> outputs) {
  const WindowGeometry& w = g.window;
  const T* x = inputs[0].as<const T>();
  const T* weight = inputs[1].as<const T>();
  const T* bias = has_view(inputs, 2) ? inputs[2].as<const T>() : nullptr;
  T* y = outputs[0].as<T>();
  const int64_t in_per_group = g.in_channels / g.group;
  const int64_t out_per_group = g.out_channels / g.group;
  const int64_t in_plane = product_of(w.input);
  const int64_t out_plane = product_of(w.output);
  const int64_t kernel_volume = product_of(w.kernel);
  std::vector<double> acc(static_cast<size_t>(g.batch * g.out_channels * out_plane), 0.0);
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t oc = 0; oc < g.out_channels; ++oc)
      for (int64_t i = 0; i < out_plane; ++i) acc[(n * g.out_channels + oc) * out_plane + i] = bias ? bias[oc] : 0.0;
  const size_t spatial = w.spatial();
  std::vector<int64_t> in_pos(spatial), k(spatial);
  if (in_plane > 0 && out_plane > 0) {
    for (int64_t n = 0; n < g.batch; ++n) {
      for (int64_t c = 0; c < g.in_channels; ++c) {
        const int64_t first_out = (c / in_per_group) * out_per_group;
        std::fill(in_pos.begin(), in_pos.end(), 0);
        int64_t in_flat = 0;
        do {
          const double xv = x[(n * g.in_channels + c) * in_plane + in_flat++];
          std::fill(k.begin(), k.end(), 0);
          int64_t k_flat = 0;
          do {
            int64_t offset = 0;
            bool inside = true;
            for (size_t d = 0; d < spatial && inside; ++d) {
              const int64_t p = in_pos[d] * w.strides[d] - w.pad_begin[d] + k[d] * w.dilations[d];
              inside = p >= 0 && p < w.output[d];
              offset = offset * w.output[d] + p;
            }
            if (inside) {
              for (int64_t om = 0; om < out_per_group; ++om) {
                const double wv = weight[(c * out_per_group + om) * kernel_volume + k_flat];
                acc[(n * g.out_channels + first_out + om) * out_plane + offset] += xv * wv;
              }
            }
            ++k_flat;
          } while (next_index(k, w.kernel));
        } while (next_index(in_pos, w.input));
      }
    }
  }
  for (size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<T>(acc[i]);
}

std::unique_ptr<Kernel> make_conv_transpose(const KernelSpec& spec) {
  const DType dtype = require_same_float_dtype(spec, {0, 1, 2});
  const TensorDesc& x = spec.inputs[0];
  const TensorDesc& weight = require_input(spec, 1, "W");
  const TensorDesc& y = require_output(spec, 0, "Y");
  const std::vector<int64_t> in_spatial = spatial_sizes(spec, x, "X");
  const size_t spatial = in_spatial.size();
  if (weight.sizes.size() != x.sizes.size() || y.sizes.size() != x.sizes.size()) {
    kernel_fail(spec, "X " + sizes_to_string(x.sizes) + ", W " + sizes_to_string(weight.sizes) + " and Y " +
                          sizes_to_string(y.sizes) + " must have the same rank");
  }
  ConvTransposeGeometry g;
  g.batch = x.sizes[0];
  g.in_channels = x.sizes[1];
  g.group = spec.attributes.get_int("group", 1);
  if (g.group < 1) kernel_fail(spec, "group must be >= 1, got " + std::to_string(g.group));
  g.out_channels = weight.sizes[1] * g.group;
  if (weight.sizes[0] != g.in_channels || g.in_channels % g.group != 0) {
    kernel_fail(spec, "W " + sizes_to_string(weight.sizes) + " does not fit X " + sizes_to_string(x.sizes) +
                          " with group=" + std::to_string(g.group) +
                          " (a ConvTranspose weight is (C, M/group, k1, ...))");
  }
  if (y.sizes[0] != g.batch || y.sizes[1] != g.out_channels) {
    kernel_fail(spec, "Y " + sizes_to_string(y.sizes) + " must be (N, W[1]*group, ...) for X " +
                          sizes_to_string(x.sizes) + " and W " + sizes_to_string(weight.sizes));
  }
  if (has_input(spec, 2) && spec.inputs[2].sizes != std::vector<int64_t>{g.out_channels}) {
    kernel_fail(spec, "B " + sizes_to_string(spec.inputs[2].sizes) + " must have one value per output channel");
  }
  const std::vector<int64_t> kernel(weight.sizes.begin() + 2, weight.sizes.end());
  if (spec.attributes.has("kernel_shape") && spec.attributes.get_ints("kernel_shape") != kernel) {
    kernel_fail(spec, "kernel_shape " + sizes_to_string(spec.attributes.get_ints("kernel_shape")) +
                          " does not match W " + sizes_to_string(weight.sizes));
  }
  const std::vector<int64_t> out_spatial(y.sizes.begin() + 2, y.sizes.end());
  g.window = read_window_geometry(spec, in_spatial, out_spatial, kernel);
  const std::vector<int64_t> output_padding =
      spec.attributes.get_ints("output_padding", std::vector<int64_t>(spatial, 0));
  if (output_padding.size() != spatial) {
    kernel_fail(spec, "output_padding has " + std::to_string(output_padding.size()) + " values, expected " +
                          std::to_string(spatial));
  }
  WindowGeometry& w = g.window;
  const bool same = w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER";
  for (size_t d = 0; d < spatial; ++d) {
    if (!same && !spec.attributes.has("output_shape")) continue;  // explicit pads (or VALID: none)
    const int64_t dilated = (kernel[d] - 1) * w.dilations[d] + 1;
    const int64_t total = w.strides[d] * (in_spatial[d] - 1) + output_padding[d] + dilated - out_spatial[d];
    w.pad_begin[d] = w.auto_pad == "SAME_UPPER" ? floor_div(total, 2) : total - floor_div(total, 2);
    w.pad_end[d] = total - w.pad_begin[d];
  }
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel([g](std::span<const TensorView> in, std::span<const TensorView> out) {
      conv_transpose_forward<T>(g, in, out);
    });
  });
}

}  // namespace

void register_reference_conv_transpose_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("ConvTranspose", kFloatDTypes, &make_conv_transpose));
}

}  // namespace onnxtrain
