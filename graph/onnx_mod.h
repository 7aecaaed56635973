// ONNX Mod's value for one pair of elements, shared by the constant folder (graph/ops/mod.cc) and the
// reference kernel (kernels/reference/elementwise_binary.cc). `fmod` false (integers only): the remainder takes the
// divisor's sign, as Python's % and numpy.mod; true: the dividend's, as C's fmod (ONNX requires it for
// floating-point inputs). An integer divisor of 0 is the caller's to refuse. Callable from CUDA device
// code too (kernels/cuda/elementwise_binary.cu).
//
//   onnx_mod<int64_t>(-4, 3, false) == 2;   onnx_mod<int64_t>(-4, 3, true) == -1
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

namespace onnxtrain {

#if defined(__CUDACC__)
#define ONNXTRAIN_MOD_HOST_DEVICE __host__ __device__
#else
#define ONNXTRAIN_MOD_HOST_DEVICE
#endif

// What is wrong with a Mod node's fmod attribute for inputs that are `floating`, or "" (the schema, the
// reference and the CUDA kernels each refuse with it).
inline std::string onnx_mod_fmod_error(int64_t fmod, bool floating) {
  if (fmod != 0 && fmod != 1) return "attribute fmod must be 0 or 1, got " + std::to_string(fmod);
  if (floating && fmod == 0)
    return "floating-point inputs need fmod=1 (ONNX: Mod with fmod=0 is defined for integers only)";
  return "";
}

template <typename T>
ONNXTRAIN_MOD_HOST_DEVICE T onnx_mod(T a, T b, bool fmod) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);
  } else if constexpr (std::is_unsigned_v<T>) {
    return static_cast<T>(a % b);
  } else {
    if (b == T(-1)) return T(0);  // the lowest value % -1 overflows in C++; the remainder is 0
    const auto r = static_cast<T>(a % b);
    return !fmod && r != 0 && ((r < 0) != (b < 0)) ? static_cast<T>(r + b) : r;
  }
}

}  // namespace onnxtrain
