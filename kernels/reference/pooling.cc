// MaxPool (optional int64 Indices), AveragePool, GlobalAveragePool and GlobalMaxPool over X (N,C,D1..Dn).
// Windows that reach past the input (pads, ceil_mode) use only the input elements they cover.
// AveragePool divides by the covered input elements, or with count_include_pad by the window elements
// inside the padded input [-pad_begin, D + pad_end) (PyTorch's rule; ceil_mode's overhang is not counted).
// MaxPool's Indices are ONNX's flattened ones: n·C·Π(D) + c·Π(D) + the element's offset in its plane,
// row major (storage_order 0) or column major (1); the first maximum in window order wins.
#include <algorithm>
#include <limits>

#include "kernels/reference/nn_common.h"
#include "kernels/reference/pool_window.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

// The column-major offset of a row-major in-plane `offset`.
int64_t column_major_offset(int64_t offset, const std::vector<int64_t>& sizes) {
  int64_t result = 0, stride = 1;
  std::vector<int64_t> index(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    index[d] = offset % sizes[d];
    offset /= sizes[d];
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    result += index[d] * stride;
    stride *= sizes[d];
  }
  return result;
}

template <typename T>
T lowest_value() {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
}

// Calls visit(plane, out_flat, out_pos) for every output position of every plane, in row-major order.
template <typename Visit>
void for_each_pooled_output(const PoolGeometry& g, Visit&& visit) {
  const WindowGeometry& w = g.window;
  if (product_of(w.output) == 0) return;
  std::vector<int64_t> out_pos(w.spatial());
  for (int64_t plane = 0; plane < g.planes; ++plane) {
    std::fill(out_pos.begin(), out_pos.end(), 0);
    int64_t out_flat = 0;
    do {
      visit(plane, out_flat++, out_pos);
    } while (next_index(out_pos, w.output));
  }
}

template <typename T>
void max_pool(const PoolGeometry& g, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  const WindowGeometry& w = g.window;
  const T* x = inputs[0].as<const T>();
  T* y = outputs[0].as<T>();
  int64_t* indices = has_view(outputs, 1) ? outputs[1].as<int64_t>() : nullptr;
  const int64_t in_plane = product_of(w.input);
  const int64_t out_plane = product_of(w.output);
  std::vector<int64_t> k(w.spatial());
  for_each_pooled_output(g, [&](int64_t plane, int64_t out_flat, const std::vector<int64_t>& out_pos) {
    T best = lowest_value<T>();
    int64_t best_offset = -1;
    for_each_window_element(w, out_pos, k, [&](int64_t offset, bool inside, bool) {
      if (inside && (best_offset < 0 || x[plane * in_plane + offset] > best)) {
        best = x[plane * in_plane + offset];
        best_offset = offset;
      }
    });
    y[plane * out_plane + out_flat] = best;
    if (indices) {
      const int64_t in_plane_index =
          g.column_major_indices && best_offset >= 0 ? column_major_offset(best_offset, w.input) : best_offset;
      indices[plane * out_plane + out_flat] = best_offset < 0 ? -1 : plane * in_plane + in_plane_index;
    }
  });
}

template <typename T>
void average_pool(const PoolGeometry& g, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  const WindowGeometry& w = g.window;
  const T* x = inputs[0].as<const T>();
  T* y = outputs[0].as<T>();
  const int64_t in_plane = product_of(w.input);
  const int64_t out_plane = product_of(w.output);
  std::vector<int64_t> k(w.spatial());
  for_each_pooled_output(g, [&](int64_t plane, int64_t out_flat, const std::vector<int64_t>& out_pos) {
    double sum = 0;
    int64_t counted = 0;
    for_each_window_element(w, out_pos, k, [&](int64_t offset, bool inside, bool padded) {
      if (inside) sum += static_cast<double>(x[plane * in_plane + offset]);
      if (g.count_include_pad ? padded : inside) ++counted;
    });
    y[plane * out_plane + out_flat] = static_cast<T>(counted > 0 ? sum / static_cast<double>(counted) : 0.0);
  });
}

PoolGeometry read_forward_pool_geometry(const KernelSpec& spec) {
  const TensorDesc& x = require_input(spec, 0, "X");
  return read_pool_geometry(spec, x, "X", require_output(spec, 0, "Y"), "Y");
}

// MaxPool also takes int8 and uint8 (ONNX allows them from opset 12; the node tests have a uint8 case).
std::unique_ptr<Kernel> make_max_pool(const KernelSpec& spec) {
  PoolGeometry g = read_forward_pool_geometry(spec);
  const DType dtype = spec.inputs[0].dtype;
  const int64_t storage_order = spec.attributes.get_int("storage_order", 0);
  if (storage_order != 0 && storage_order != 1) {
    kernel_fail(spec, "storage_order must be 0 (row major) or 1 (column major), got " + std::to_string(storage_order));
  }
  g.column_major_indices = storage_order == 1;
  if (has_output(spec, 1) &&
      (spec.outputs[1].dtype != DType::Int64 || spec.outputs[1].sizes != spec.outputs[0].sizes)) {
    kernel_fail(spec, "Indices must be int64 and shaped like Y " + sizes_to_string(spec.outputs[0].sizes));
  }
  auto make = [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { max_pool<T>(g, in, out); });
  };
  if (dtype == DType::Int8) return make(int8_t{});
  if (dtype == DType::UInt8) return make(uint8_t{});
  return make_float_kernel(spec, dtype, make);
}

std::unique_ptr<Kernel> make_average_pool(const KernelSpec& spec) {
  const DType dtype = require_same_float_dtype(spec, {0});
  PoolGeometry g = read_forward_pool_geometry(spec);
  g.count_include_pad = read_count_include_pad(spec);
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { average_pool<T>(g, in, out); });
  });
}

// Global pools: one value per (n, c) plane.
template <typename T, bool Max>
void global_pool(int64_t planes, int64_t plane_size, std::span<const TensorView> inputs,
                 std::span<const TensorView> outputs) {
  const T* x = inputs[0].as<const T>();
  T* y = outputs[0].as<T>();
  for (int64_t p = 0; p < planes; ++p) {
    const T* v = x + p * plane_size;
    if constexpr (Max) {
      T best = -std::numeric_limits<T>::infinity();
      for (int64_t i = 0; i < plane_size; ++i) best = i == 0 || v[i] > best ? v[i] : best;
      y[p] = best;
    } else {
      double sum = 0;
      for (int64_t i = 0; i < plane_size; ++i) sum += static_cast<double>(v[i]);
      y[p] = static_cast<T>(plane_size > 0 ? sum / static_cast<double>(plane_size) : 0.0);
    }
  }
}

template <bool Max>
std::unique_ptr<Kernel> make_global_pool(const KernelSpec& spec) {
  const DType dtype = require_same_float_dtype(spec, {0});
  const std::vector<int64_t>& x = spec.inputs[0].sizes;
  const TensorDesc& y = require_output(spec, 0, "Y");
  if (x.size() < 2) kernel_fail(spec, "X must be (N,C,D1,...), got " + sizes_to_string(x));
  std::vector<int64_t> expected(x.size(), 1);
  expected[0] = x[0];
  expected[1] = x[1];
  if (y.sizes != expected)
    kernel_fail(spec, "Y is " + sizes_to_string(y.sizes) + ", expected " + sizes_to_string(expected));
  const int64_t planes = x[0] * x[1];
  const int64_t plane_size = product_of(x, 2);
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel([planes, plane_size](std::span<const TensorView> in, std::span<const TensorView> out) {
      global_pool<T, Max>(planes, plane_size, in, out);
    });
  });
}

}  // namespace

void register_reference_pooling_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("MaxPool", {DType::Float32, DType::Float64, DType::Int8, DType::UInt8}, &make_max_pool));
  registry.add(reference_entry("AveragePool", kFloatDTypes, &make_average_pool));
  registry.add(reference_entry("GlobalAveragePool", kFloatDTypes, &make_global_pool<false>));
  registry.add(reference_entry("GlobalMaxPool", kFloatDTypes, &make_global_pool<true>));
}

}  // namespace onnxtrain
