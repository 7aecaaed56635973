// Reference kernels of MaxPoolGrad(dY, X) and AveragePoolGrad(dY, x_shape) -> dX (domain ai.onnxtrain),
// float32/float64. The window geometry is the forward's (window.h), with dY's spatial sizes as the
// pooled ones. MaxPoolGrad adds each dY element to the first maximal X element of its window, the one
// the reference MaxPool picks (windows wholly in the padding get nothing). AveragePoolGrad spreads each
// dY element evenly over the input elements its window covers, dividing by the forward's count (with
// count_include_pad the window elements inside the padded input). Sums are in double.
#include "kernels/reference/nn_common.h"
#include "kernels/reference/pool_window.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

// For each output position of a plane, the window elements in visiting order, as (offset, inside, padded).
struct WindowElement {
  int64_t offset;
  bool inside, padded;
};
std::vector<std::vector<WindowElement>> window_elements(const WindowGeometry& w) {
  std::vector<std::vector<WindowElement>> windows(static_cast<size_t>(product_of(w.output)));
  if (windows.empty()) return windows;
  std::vector<int64_t> out_pos(w.spatial(), 0), k(w.spatial());
  int64_t out_flat = 0;
  do {
    for_each_window_element(w, out_pos, k, [&](int64_t offset, bool inside, bool padded) {
      windows[out_flat].push_back({offset, inside, padded});
    });
    ++out_flat;
  } while (next_index(out_pos, w.output));
  return windows;
}

template <typename T>
void max_pool_grad(const PoolGeometry& g, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  const WindowGeometry& w = g.window;
  const T* dy = inputs[0].as<const T>();
  const T* x = inputs[1].as<const T>();
  const int64_t in_plane = product_of(w.input), out_plane = product_of(w.output);
  const std::vector<std::vector<WindowElement>> windows = window_elements(w);
  std::vector<double> dx(static_cast<size_t>(g.planes * in_plane), 0.0);
  for (int64_t plane = 0; plane < g.planes; ++plane) {
    const T* xp = x + plane * in_plane;
    for (int64_t o = 0; o < out_plane; ++o) {
      int64_t best = -1;
      for (const WindowElement& e : windows[o]) {
        if (e.inside && (best < 0 || xp[e.offset] > xp[best])) best = e.offset;
      }
      if (best >= 0) dx[plane * in_plane + best] += static_cast<double>(dy[plane * out_plane + o]);
    }
  }
  T* out = outputs[0].as<T>();
  for (size_t i = 0; i < dx.size(); ++i) out[i] = static_cast<T>(dx[i]);
}

template <typename T>
void average_pool_grad(const PoolGeometry& g, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  const WindowGeometry& w = g.window;
  const T* dy = inputs[0].as<const T>();
  const int64_t in_plane = product_of(w.input), out_plane = product_of(w.output);
  const std::vector<std::vector<WindowElement>> windows = window_elements(w);
  std::vector<double> dx(static_cast<size_t>(g.planes * in_plane), 0.0);
  for (int64_t plane = 0; plane < g.planes; ++plane) {
    for (int64_t o = 0; o < out_plane; ++o) {
      int64_t counted = 0;
      for (const WindowElement& e : windows[o]) counted += (g.count_include_pad ? e.padded : e.inside) ? 1 : 0;
      if (counted == 0) continue;
      const double share = static_cast<double>(dy[plane * out_plane + o]) / static_cast<double>(counted);
      for (const WindowElement& e : windows[o]) {
        if (e.inside) dx[plane * in_plane + e.offset] += share;
      }
    }
  }
  T* out = outputs[0].as<T>();
  for (size_t i = 0; i < dx.size(); ++i) out[i] = static_cast<T>(dx[i]);
}

// dY (N,C,pooled...) and dX (N,C,D...) from the spec; dX's sizes are its output desc's.
PoolGeometry read_pool_grad_geometry(const KernelSpec& spec, DType dtype) {
  const TensorDesc& dy = require_input(spec, 0, "dY");
  const TensorDesc& dx = require_output(spec, 0, "dX");
  require_output(spec, 0, dtype, dx.sizes);
  return read_pool_geometry(spec, dx, "dX", dy, "dY");
}

std::unique_ptr<Kernel> make_max_pool_grad(const KernelSpec& spec) {
  require_input_count(spec, 2, 2);
  const DType dtype = require_same_float_dtype(spec, {0, 1});
  const PoolGeometry g = read_pool_grad_geometry(spec, dtype);
  if (require_input(spec, 1, "X").sizes != spec.outputs[0].sizes) {
    kernel_fail(spec, "dX must have X's shape " + sizes_to_string(spec.inputs[1].sizes));
  }
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { max_pool_grad<T>(g, in, out); });
  });
}

std::unique_ptr<Kernel> make_average_pool_grad(const KernelSpec& spec) {
  require_input_count(spec, 2, 2);
  const DType dtype = require_same_float_dtype(spec, {0});
  PoolGeometry g = read_pool_grad_geometry(spec, dtype);
  g.count_include_pad = read_count_include_pad(spec);
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { average_pool_grad<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_pooling_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("MaxPoolGrad", kFloatDTypes, &make_max_pool_grad));
  registry.add(reference_training_entry("AveragePoolGrad", kFloatDTypes, &make_average_pool_grad));
}

}  // namespace onnxtrain
