// Element conversions the reference kernels share: float16/bfloat16 bit patterns, a saturating
// float → integer conversion, and a store of a double into an element of any fixed-size dtype (Cast,
// and Pad's `value` attribute, use them).
//
//   y[i] = double_to_half_bits(x[i]);                 // float16 storage
//   store_double(TensorView::of(constant), 0, 1.5);  // any fixed-size dtype
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "graph/error.h"
#include "kernels/kernel.h"
#include "kernels/reference/common.h"

namespace onnxtrain::reference {

// A float converted to integer type T: truncated toward zero like static_cast; NaN → 0 and out-of-range
// values saturate (where static_cast would be undefined).
template <typename T>
T float_to_integer(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

// --- float16 / bfloat16 bit patterns ---
inline float bits_to_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa units of 2^-24
    const float v = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -v : v;
  }
  if (exponent == 31) return bits_to_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_to_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// Rounds to the nearest float16, ties to even (numpy's astype(float16)); from double so that a float64
// source is rounded once, not twice through float32.
inline uint16_t double_to_half_bits(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (std::isnan(v)) return sign | 0x7e00;
  if (std::isinf(v)) return sign | 0x7c00;
  if (a < 0x1p-14) return sign | static_cast<uint16_t>(std::nearbyint(a * 0x1p24));  // subnormal (1024 = min normal)
  int exponent = 0;
  double mantissa = std::nearbyint(std::ldexp(std::frexp(a, &exponent), 11));  // 11 significant bits
  if (mantissa == 2048) {
    mantissa = 1024;
    ++exponent;
  }
  const int biased = exponent - 1 + 15;
  if (biased >= 31) return sign | 0x7c00;  // past 65504: infinity
  return sign | static_cast<uint16_t>((biased << 10) | (static_cast<int>(mantissa) - 1024));
}

inline float bfloat16_bits_to_float(uint16_t b) { return bits_to_float(static_cast<uint32_t>(b) << 16); }

// Rounds to the nearest bfloat16, ties to even, from double (one rounding), as PyTorch, CUDA's
// __float2bfloat16_rn and ONNX's reference from 1.13 do (1.12's truncated). Past the largest bfloat16 the
// result is infinity; NaN stays NaN.
inline uint16_t double_to_bfloat16_bits(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return sign | 0x7fc0;
  if (std::isinf(v)) return sign | 0x7f80;
  const double a = std::fabs(v);
  if (a < 0x1p-126) return sign | static_cast<uint16_t>(std::nearbyint(a * 0x1p133));  // subnormal: units of 2^-133
  int exponent = 0;
  double mantissa = std::nearbyint(std::ldexp(std::frexp(a, &exponent), 8));  // 8 significant bits
  if (mantissa == 256) {
    mantissa = 128;
    ++exponent;
  }
  const int biased = exponent - 1 + 127;
  if (biased >= 255) return sign | 0x7f80;
  return sign | static_cast<uint16_t>((biased << 7) | (static_cast<int>(mantissa) - 128));
}

inline uint16_t float_to_bfloat16_bits(float f) { return double_to_bfloat16_bits(f); }

// Stores v into element i of `view` as Pad's `value` attribute is stored: floats rounded (float16 and
// bfloat16 to nearest even, both from float32), integers through int64 (saturating) then wrapped to the
// element type, uint64 0 outside [0, 2^64), bool v != 0.
inline void store_double(const TensorView& view, int64_t i, double v) {
  auto store = [&](auto value) { static_cast<decltype(value)*>(view.data)[i] = value; };
  const auto wide = float_to_integer<int64_t>(v);
  switch (view.dtype) {
    case DType::Float32:
      return store(static_cast<float>(v));
    case DType::Float64:
      return store(v);
    case DType::Float16:
      return store(double_to_half_bits(static_cast<float>(v)));
    case DType::BFloat16:
      return store(float_to_bfloat16_bits(static_cast<float>(v)));
    case DType::Bool:
      return store(static_cast<uint8_t>(v != 0));
    case DType::Int8:
      return store(static_cast<int8_t>(wide));
    case DType::UInt8:
      return store(static_cast<uint8_t>(wide));
    case DType::Int16:
      return store(static_cast<int16_t>(wide));
    case DType::UInt16:
      return store(static_cast<uint16_t>(wide));
    case DType::Int32:
      return store(static_cast<int32_t>(wide));
    case DType::UInt32:
      return store(static_cast<uint32_t>(wide));
    case DType::Int64:
      return store(wide);
    case DType::UInt64:
      return store(v >= 0 && v < 0x1p64 ? static_cast<uint64_t>(v) : uint64_t{0});
    default:
      ONNXTRAIN_CHECK(false, "no numeric element of dtype " + std::string(dtype_name(view.dtype)));
  }
}

// --- Cast's storage types: one per fixed-size dtype without a C++ arithmetic type ---
struct HalfBits {
  uint16_t bits;
};
struct BFloat16Bits {
  uint16_t bits;
};
struct BoolByte {
  uint8_t byte;
};

// Calls fn(S{}) with the storage type S of `dtype` (the arithmetic type, or one of the three above);
// false for a dtype without fixed-size elements.
template <typename Fn>
bool dispatch_cast_storage(DType dtype, Fn&& fn) {
  // clang-format off
  switch (dtype) {
    case DType::Float16: fn(HalfBits{}); return true;
    case DType::BFloat16: fn(BFloat16Bits{}); return true;
    case DType::Bool: fn(BoolByte{}); return true;
    default: return dispatch_arithmetic(dtype, fn);
  }
  // clang-format on
}

}  // namespace onnxtrain::reference
