// ConvGrad (ai.onnxtrain), 1-D to 3-D: from dY (N,M,O1..On), X (N,C,D1..Dn) and W (M,C/group,k1..kn) the
// optional outputs dX, dW and dB (M). The loops of the Conv reference kernel, scattering instead of
// gathering: every (output position, input channel, kernel element) pair that reads X[p]·W[k] adds
// dY·W[k] to dX[p] and dY·X[p] to dW[k]; dB sums dY. Accumulates in double (also for float16/bfloat16,
// whose results are rounded once: kernels/reference/half_float.h).
#include <algorithm>

#include "kernels/reference/conv_geometry.h"
#include "kernels/reference/half_float.h"
#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"
#include "kernels/reference/window.h"

namespace onnxtrain {
namespace {

using namespace reference;

struct ConvGradGeometry : ConvGeometry {
  bool dx = false, dw = false, db = false;
};

template <typename T>
void conv_grad(const ConvGradGeometry& g, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  const WindowGeometry& w = g.window;
  const T* dy = inputs[0].as<const T>();
  const T* x = inputs[1].as<const T>();
  const T* weight = inputs[2].as<const T>();
  const int64_t in_per_group = g.in_channels / g.group;
  const int64_t out_per_group = g.out_channels / g.group;
  const int64_t in_plane = product_of(w.input);
  const int64_t out_plane = product_of(w.output);
  const int64_t kernel_volume = product_of(w.kernel);
  std::vector<double> dx(g.dx ? static_cast<size_t>(g.batch * g.in_channels * in_plane) : 0, 0.0);
  std::vector<double> dw(g.dw ? static_cast<size_t>(g.out_channels * in_per_group * kernel_volume) : 0, 0.0);
  std::vector<double> db(g.db ? static_cast<size_t>(g.out_channels) : 0, 0.0);
  const size_t spatial = w.spatial();
  std::vector<int64_t> out_pos(spatial), k(spatial);
  if (out_plane > 0 && in_plane > 0) {
    for (int64_t n = 0; n < g.batch; ++n) {
      for (int64_t oc = 0; oc < g.out_channels; ++oc) {
        const int64_t first_channel = (oc / out_per_group) * in_per_group;
        const T* dy_plane = dy + (n * g.out_channels + oc) * out_plane;
        std::fill(out_pos.begin(), out_pos.end(), 0);
        int64_t out_flat = 0;
        do {
          const double grad = static_cast<double>(dy_plane[out_flat++]);
          if (g.db) db[oc] += grad;
          if (!g.dx && !g.dw) continue;
          for (int64_t ic = 0; ic < in_per_group; ++ic) {
            const int64_t x_base = (n * g.in_channels + first_channel + ic) * in_plane;
            const int64_t w_base = (oc * in_per_group + ic) * kernel_volume;
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
              if (inside) {
                if (g.dx) dx[x_base + offset] += grad * static_cast<double>(weight[w_base + k_flat]);
                if (g.dw) dw[w_base + k_flat] += grad * static_cast<double>(x[x_base + offset]);
              }
              ++k_flat;
            } while (next_index(k, w.kernel));
          }
        } while (next_index(out_pos, w.output));
      }
    }
  }
  const std::vector<double>* results[] = {&dx, &dw, &db};
  const bool wanted[] = {g.dx, g.dw, g.db};
  for (size_t o = 0; o < 3; ++o) {
    if (!wanted[o]) continue;
    T* out = outputs[o].as<T>();
    for (size_t i = 0; i < results[o]->size(); ++i) out[i] = static_cast<T>((*results[o])[i]);
  }
}

std::unique_ptr<Kernel> make_conv_grad(const KernelSpec& spec) {
  require_input_count(spec, 3, 3);
  const DType dtype = require_same_float_or_half_dtype(spec, {0, 1, 2});
  const TensorDesc& dy = spec.inputs[0];
  const TensorDesc& x = require_input(spec, 1, "X");
  const TensorDesc& weight = require_input(spec, 2, "W");
  ConvGradGeometry g{read_conv_geometry(spec, x, weight, dy, "dY")};
  const WindowGeometry& w = g.window;
  for (size_t d = 0; d < w.spatial(); ++d) {
    const int64_t dilated = (w.kernel[d] - 1) * w.dilations[d] + 1;
    const int64_t span = w.input[d] + w.pad_begin[d] + w.pad_end[d] - dilated;
    if (span < 0 || span / w.strides[d] + 1 != w.output[d]) {
      kernel_fail(spec, "dY " + sizes_to_string(dy.sizes) + " is not the Conv output of X " + sizes_to_string(x.sizes) +
                            " and W " + sizes_to_string(weight.sizes) + " on spatial axis " + std::to_string(d));
    }
  }
  g.dx = has_output(spec, 0);
  g.dw = has_output(spec, 1);
  g.db = has_output(spec, 2);
  if (g.dx) require_output(spec, 0, dtype, x.sizes);
  if (g.dw) require_output(spec, 1, dtype, weight.sizes);
  if (g.db) require_output(spec, 2, dtype, {g.out_channels});
  return make_float_or_half_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { conv_grad<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_conv_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("ConvGrad", kFloatAndHalfDTypes, &make_conv_grad));
}

}  // namespace onnxtrain
