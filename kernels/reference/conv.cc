// Conv, 1-D to 3-D (any number of spatial dims): X (N,C,D1..Dn), W (M,C/group,k1..kn), optional B (M).
// Direct loops over output position, input channel of the group and kernel element. float32, float64, and
// float16/bfloat16 (accumulating in double, the result rounded once: kernels/reference/half_float.h).
#include <algorithm>

#include "kernels/reference/conv_geometry.h"
#include "kernels/reference/half_float.h"
#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"
#include "kernels/reference/window.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <typename T>
void conv_forward(const ConvGeometry& g, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
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
  if (g.batch * g.out_channels * out_plane == 0) return;
  const size_t spatial = w.spatial();
  std::vector<int64_t> out_pos(spatial), k(spatial);
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t oc = 0; oc < g.out_channels; ++oc) {
      const int64_t first_channel = (oc / out_per_group) * in_per_group;
      T* y_plane = y + (n * g.out_channels + oc) * out_plane;
      std::fill(out_pos.begin(), out_pos.end(), 0);
      int64_t out_flat = 0;
      do {
        double acc = bias ? static_cast<double>(bias[oc]) : 0.0;
        for (int64_t ic = 0; ic < in_per_group; ++ic) {
          const T* x_plane = x + (n * g.in_channels + first_channel + ic) * in_plane;
          const T* w_kernel = weight + (oc * in_per_group + ic) * kernel_volume;
          std::fill(k.begin(), k.end(), 0);
          int64_t k_flat = 0;
          do {
            int64_t offset = 0;
            bool inside = true;
            for (size_t d = 0; d < spatial && inside; ++d) {
              const int64_t p = w.input_position(d, out_pos[d], k[d]);
              inside = p >= 0 && p < w.input[d];
              offset = offset * w.input[d] + p;
            }
            if (inside) acc += static_cast<double>(x_plane[offset]) * static_cast<double>(w_kernel[k_flat]);
            ++k_flat;
          } while (next_index(k, w.kernel));
        }
        y_plane[out_flat++] = static_cast<T>(acc);
      } while (next_index(out_pos, w.output));
    }
  }
}

std::unique_ptr<Kernel> make_conv(const KernelSpec& spec) {
  const DType dtype = require_same_float_or_half_dtype(spec, {0, 1, 2});
  const TensorDesc& x = spec.inputs[0];
  const TensorDesc& weight = require_input(spec, 1, "W");
  const TensorDesc& y = require_output(spec, 0, "Y");
  const ConvGeometry g = read_conv_geometry(spec, x, weight, y, "Y");
  if (has_input(spec, 2) && spec.inputs[2].sizes != std::vector<int64_t>{g.out_channels}) {
    kernel_fail(spec, "B " + sizes_to_string(spec.inputs[2].sizes) + " must have one value per output channel");
  }
  return make_float_or_half_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { conv_forward<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_conv_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Conv", kFloatAndHalfDTypes, &make_conv));
}

}  // namespace onnxtrain
