// What the conv, matmul, pooling, normalisation and loss reference kernels share: prepare-time checks of
// dtypes and argument presence, a kernel built from a closure over precomputed geometry, and an N-D
// index odometer. Accumulation in these kernels is always in double, so the float32 and float64
// kernels differ only in the rounding of their inputs and outputs.
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

#include "kernels/reference/common.h"

namespace onnxtrain::reference {

// A kernel whose run() calls fn(inputs, outputs); the closure may be `mutable` (Dropout keeps its RNG).
template <typename Fn>
class ClosureKernel final : public Kernel {
 public:
  explicit ClosureKernel(Fn fn) : fn_(std::move(fn)) {}
  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    fn_(inputs, outputs);
  }

 private:
  Fn fn_;
};

template <typename Fn>
std::unique_ptr<Kernel> make_closure_kernel(Fn fn) {
  return std::make_unique<ClosureKernel<Fn>>(std::move(fn));
}

// Calls make(T{}) with T the C++ type of float32/float64 `dtype` and returns its kernel; fails otherwise.
template <typename Make>
std::unique_ptr<Kernel> make_float_kernel(const KernelSpec& spec, DType dtype, Make&& make) {
  std::unique_ptr<Kernel> kernel;
  if (!dispatch_float(dtype, [&](auto zero) { kernel = make(zero); })) {
    kernel_fail(spec, "the reference kernel supports float32 and float64, got " + std::string(dtype_name(dtype)));
  }
  return kernel;
}

inline bool has_input(const KernelSpec& spec, size_t i) { return i < spec.inputs.size() && spec.inputs[i].present(); }
inline bool has_output(const KernelSpec& spec, size_t i) {
  return i < spec.outputs.size() && spec.outputs[i].present();
}
inline bool has_view(std::span<const TensorView> views, size_t i) {
  return i < views.size() && views[i].data != nullptr;
}

// Fails unless input `i` is present; `what` names it ("W", "scale").
inline const TensorDesc& require_input(const KernelSpec& spec, size_t i, const std::string& what) {
  if (!has_input(spec, i)) kernel_fail(spec, "input " + std::to_string(i) + " (" + what + ") is required");
  return spec.inputs[i];
}

inline const TensorDesc& require_output(const KernelSpec& spec, size_t i, const std::string& what) {
  if (!has_output(spec, i)) kernel_fail(spec, "output " + std::to_string(i) + " (" + what + ") is required");
  return spec.outputs[i];
}

// The dtype of input `inputs[0]` (float32 or float64); every other listed input that is present must share
// it. Fails naming the first that differs.
inline DType require_same_float_dtype(const KernelSpec& spec, std::initializer_list<size_t> inputs) {
  const size_t first = *inputs.begin();
  const DType dtype = require_input(spec, first, "data").dtype;
  if (dtype != DType::Float32 && dtype != DType::Float64) {
    kernel_fail(spec, "the reference kernel supports float32 and float64, got " + std::string(dtype_name(dtype)));
  }
  for (size_t i : inputs) {
    if (has_input(spec, i) && spec.inputs[i].dtype != dtype) {
      kernel_fail(spec, "input " + std::to_string(i) + " is " + std::string(dtype_name(spec.inputs[i].dtype)) +
                            " but input " + std::to_string(first) + " is " + std::string(dtype_name(dtype)) +
                            " (the reference kernel needs one dtype)");
    }
  }
  return dtype;
}

inline int64_t product_of(const std::vector<int64_t>& sizes, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < sizes.size() && i < to; ++i) p *= sizes[i];
  return p;
}

// Steps `index` to the next position of `sizes` in row-major order; false after the last one.
inline bool next_index(std::vector<int64_t>& index, const std::vector<int64_t>& sizes) {
  for (size_t d = index.size(); d-- > 0;) {
    if (++index[d] < sizes[d]) return true;
    index[d] = 0;
  }
  return false;
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

inline bool is_float32_or_64(DType dtype) { return dtype == DType::Float32 || dtype == DType::Float64; }

inline std::string sizes_to_string(const std::vector<int64_t>& sizes) {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? "," : "") + std::to_string(sizes[i]);
  return s + ")";
}

}  // namespace onnxtrain::reference
