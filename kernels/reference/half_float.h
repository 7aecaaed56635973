// float16 and bfloat16 as element types of the reference compute kernels (Conv, ConvGrad, Gemm, MatMul):
// what cuDNN/cuBLAS do with float compute on half storage. An element reads as its exact float value,
// the kernel accumulates as it does for float32 (in double), and storing the result rounds it once to the
// element type, to nearest even. Mixed-precision training (graph/mixed_precision.h) runs these four ops
// in half; everything else stays float32.
//
//   return make_float_or_half_kernel(spec, dtype, [&](auto zero) {
//     using T = decltype(zero);                    // float, double, Float16 or BFloat16
//     ... y[i] = static_cast<T>(acc); double v = static_cast<double>(x[i]); ...
//   });
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>

#include "kernels/reference/element_convert.h"
#include "kernels/reference/nn_common.h"

namespace onnxtrain::reference {

// A float16 element: 2 bytes of storage, read as double, written from double rounding to nearest even.
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(double v) : bits(double_to_half_bits(v)) {}
  operator double() const { return half_bits_to_float(bits); }
};
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(double v) : bits(double_to_bfloat16_bits(v)) {}
  operator double() const { return bfloat16_bits_to_float(bits); }
};
static_assert(sizeof(Float16) == 2 && sizeof(BFloat16) == 2);

// The compute kernels' dtypes: float32/float64 and the two half types.
inline const std::vector<DType> kFloatAndHalfDTypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};

inline bool is_float_or_half(DType dtype) {
  return is_float32_or_64(dtype) || dtype == DType::Float16 || dtype == DType::BFloat16;
}

// As require_same_float_dtype, float16 and bfloat16 allowed too.
inline DType require_same_float_or_half_dtype(const KernelSpec& spec, std::initializer_list<size_t> inputs) {
  const DType dtype = require_input(spec, *inputs.begin(), "data").dtype;
  if (!is_float_or_half(dtype)) {
    kernel_fail(spec, "the reference kernel supports float32, float64, float16 and bfloat16, got " +
                          std::string(dtype_name(dtype)));
  }
  require_inputs_share_dtype(spec, inputs, dtype);
  return dtype;
}

// As make_float_kernel, with T Float16 or BFloat16 for the half dtypes.
template <typename Make>
std::unique_ptr<Kernel> make_float_or_half_kernel(const KernelSpec& spec, DType dtype, Make&& make) {
  if (dtype == DType::Float16) return make(Float16{});
  if (dtype == DType::BFloat16) return make(BFloat16{});
  return make_float_kernel(spec, dtype, std::forward<Make>(make));
}

}  // namespace onnxtrain::reference
