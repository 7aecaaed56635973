// What the conv, matmul, pooling, normalisation and loss reference kernels share beyond kernel_plumbing.h:
// float32/float64 dtype checks and dispatch to a kernel built from a closure over precomputed geometry,
// optional run-time views, and per-channel vectors widened to double. Accumulation in these kernels is
// always in double, so the float32 and float64 kernels differ only in the rounding of their inputs and
// outputs.
//
//   const DType dtype = require_same_float_dtype(spec, {0, 1, 2});
//   return make_float_kernel(spec, dtype, [&](auto zero) {
//     using T = decltype(zero);
//     return make_closure_kernel([geometry](auto inputs, auto outputs) { gemm<T>(geometry, inputs, outputs); });
//   });
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/reference/kernel_plumbing.h"

namespace onnxtrain::reference {

inline bool is_float32_or_64(DType dtype) { return dtype == DType::Float32 || dtype == DType::Float64; }

// Fails unless `dtype` is float32 or float64.
inline void require_float_dtype(const KernelSpec& spec, DType dtype) {
  if (!is_float32_or_64(dtype)) {
    kernel_fail(spec, "the reference kernel supports float32 and float64, got " + std::string(dtype_name(dtype)));
  }
}

// Calls make(T{}) with T the C++ type of float32/float64 `dtype` and returns its kernel; fails otherwise.
template <typename Make>
std::unique_ptr<Kernel> make_float_kernel(const KernelSpec& spec, DType dtype, Make&& make) {
  std::unique_ptr<Kernel> kernel;
  require_float_dtype(spec, dtype);
  dispatch_float(dtype, [&](auto zero) { kernel = make(zero); });
  return kernel;
}

inline bool has_view(std::span<const TensorView> views, size_t i) {
  return i < views.size() && views[i].data != nullptr;
}

// The dtype of input `inputs[0]` (float32 or float64); every other listed input that is present must share
// it. Fails naming the first that differs.
inline DType require_same_float_dtype(const KernelSpec& spec, std::initializer_list<size_t> inputs) {
  const size_t first = *inputs.begin();
  const DType dtype = require_input(spec, first, "data").dtype;
  require_float_dtype(spec, dtype);
  for (size_t i : inputs) {
    if (has_input(spec, i) && spec.inputs[i].dtype != dtype) {
      kernel_fail(spec, "input " + std::to_string(i) + " is " + std::string(dtype_name(spec.inputs[i].dtype)) +
                            " but input " + std::to_string(first) + " is " + std::string(dtype_name(dtype)) +
                            " (the reference kernel needs one dtype)");
    }
  }
  return dtype;
}

// The elements of a float32/float64 view widened to double (per-channel vectors whose dtype may differ
// from X's, as BatchNormalization's may from opset 15).
inline std::vector<double> to_doubles(const TensorView& v) {
  std::vector<double> values(static_cast<size_t>(v.numel()));
  dispatch_float(v.dtype, [&](auto zero) {
    using T = decltype(zero);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(v.as<const T>()[i]);
  });
  return values;
}

// Stores `values` into a float32/float64 view of the same numel.
inline void store_doubles(const TensorView& v, const std::vector<double>& values) {
  dispatch_float(v.dtype, [&](auto zero) {
    using T = decltype(zero);
    for (size_t i = 0; i < values.size(); ++i) v.as<T>()[i] = static_cast<T>(values[i]);
  });
}

}  // namespace onnxtrain::reference
