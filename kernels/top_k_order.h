// The order in which TopK returns elements, shared by the reference kernel (kernels/reference/top_k.cc)
// and the CUDA kernel (kernels/cuda/top_k.cu) so that their outputs agree bit for bit: a comes before b
// when it is larger (largest = true) or smaller, NaN counting as the largest value, and equal values by
// the lower index, as ONNX's reference does.
#pragma once

#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define ONNXTRAIN_TOP_K_HOST_DEVICE __host__ __device__
#else
#define ONNXTRAIN_TOP_K_HOST_DEVICE
#endif

namespace onnxtrain {

template <typename T>
ONNXTRAIN_TOP_K_HOST_DEVICE bool top_k_comes_before(T a, int64_t ia, T b, int64_t ib, bool largest) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool a_nan = a != a, b_nan = b != b;  // NaN alone compares unequal to itself
    if (a_nan || b_nan) return a_nan != b_nan ? a_nan == largest : ia < ib;
  }
  if (a != b) return largest ? a > b : a < b;
  return ia < ib;
}

}  // namespace onnxtrain
