// What the elementwise, reduction, cast and softmax reference kernels share beyond common.h: a kernel
// made of one closure, dtype lists and dispatch over every arithmetic type, prepare-time checks that
// fail with the op and node named, and float16/bfloat16 bit conversions.
//
//   DType dtype = require_dtype_in(spec, 0, kFloatDTypes);
//   require_output(spec, 0, dtype, spec.inputs[0].sizes);
//   return make_closure_kernel([dtype](auto inputs, auto outputs) { ... });
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "kernels/reference/common.h"

// A nested namespace: the other reference families keep helpers of the same names in their own headers.
namespace onnxtrain::reference::elementwise {

using KernelBody = std::function<void(std::span<const TensorView> inputs, std::span<const TensorView> outputs)>;

// A kernel whose run() is one closure prepared by the factory.
class ClosureKernel final : public Kernel {
 public:
  explicit ClosureKernel(KernelBody body) : body_(std::move(body)) {}
  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    body_(inputs, outputs);
  }

 private:
  KernelBody body_;
};

inline std::unique_ptr<Kernel> make_closure_kernel(KernelBody body) {
  return std::make_unique<ClosureKernel>(std::move(body));
}

// A CPU entry of the "reference" implementation in the default domain.
inline KernelEntry reference_entry(const char* op_type, std::vector<DType> dtypes, KernelFactory factory) {
  return {.domain = "",
          .op_type = op_type,
          .device = DeviceKind::Cpu,
          .dtypes = std::move(dtypes),
          .implementation = "reference",
          .factory = factory};
}

// --- dtype lists (KernelEntry::dtypes and prepare checks) ---
inline const std::vector<DType> kFloatDTypes = {DType::Float32, DType::Float64};
inline const std::vector<DType> kSignedDTypes = {DType::Float32, DType::Float64, DType::Int8,
                                                 DType::Int16,   DType::Int32,   DType::Int64};
inline const std::vector<DType> kArithmeticDTypes = {DType::Float32, DType::Float64, DType::Int8,  DType::UInt8,
                                                     DType::Int16,   DType::UInt16,  DType::Int32, DType::UInt32,
                                                     DType::Int64,   DType::UInt64};
// Every type Cast converts between.
inline const std::vector<DType> kCastDTypes = {
    DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8,   DType::UInt8, DType::Int16,
    DType::UInt16,  DType::Int32,   DType::UInt32,  DType::Int64,    DType::UInt64, DType::Bool};

inline std::vector<DType> with_bool(std::vector<DType> dtypes) {
  dtypes.push_back(DType::Bool);
  return dtypes;
}

// Calls fn(T{}) with the C++ type of any arithmetic dtype (float32/float64 and the eight integer types).
template <typename Fn>
bool dispatch_arithmetic(DType dtype, Fn&& fn) {
  // clang-format off
  switch (dtype) {
    case DType::Int8: fn(int8_t{}); return true;
    case DType::UInt8: fn(uint8_t{}); return true;
    case DType::Int16: fn(int16_t{}); return true;
    case DType::UInt16: fn(uint16_t{}); return true;
    case DType::UInt32: fn(uint32_t{}); return true;
    case DType::UInt64: fn(uint64_t{}); return true;
    default: return dispatch_numeric(dtype, fn);
  }
  // clang-format on
}

// A float converted to integer type T: truncated toward zero like static_cast; NaN → 0 and out-of-range
// values saturate (where static_cast would be undefined).
template <typename T>
T float_to_integer(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

// Bool elements are bytes; any non-zero byte is true.
inline bool read_bool(const TensorView& v, int64_t i) { return static_cast<const uint8_t*>(v.data)[i] != 0; }
inline void write_bool(const TensorView& v, int64_t i, bool b) { static_cast<uint8_t*>(v.data)[i] = b ? 1 : 0; }

// --- prepare-time checks; each fails with reference::kernel_fail ---
inline std::string sizes_to_string(const std::vector<int64_t>& sizes) {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? "," : "") + std::to_string(sizes[i]);
  return s + ")";
}

inline void require_input_count(const KernelSpec& spec, size_t min, size_t max) {
  if (spec.inputs.size() < min || spec.inputs.size() > max) {
    kernel_fail(spec, "takes " + std::to_string(min) + (min == max ? "" : ".." + std::to_string(max)) +
                          (max == 1 ? " input" : " inputs") + ", got " + std::to_string(spec.inputs.size()));
  }
}

inline bool input_present(const KernelSpec& spec, size_t i) {
  return i < spec.inputs.size() && spec.inputs[i].present();
}

// The dtype of input `i`, which must be present and one of `allowed`.
inline DType require_dtype_in(const KernelSpec& spec, size_t i, const std::vector<DType>& allowed) {
  if (!input_present(spec, i)) kernel_fail(spec, "input " + std::to_string(i) + " is required");
  const DType dtype = spec.inputs[i].dtype;
  if (std::find(allowed.begin(), allowed.end(), dtype) == allowed.end()) {
    std::string names;
    for (DType d : allowed) names += (names.empty() ? "" : ", ") + std::string(dtype_name(d));
    kernel_fail(spec, "input " + std::to_string(i) + " has dtype " + std::string(dtype_name(dtype)) +
                          ", the reference kernel supports " + names);
  }
  return dtype;
}

inline void require_same_dtype(const KernelSpec& spec, size_t i, size_t reference) {
  if (spec.inputs[i].dtype != spec.inputs[reference].dtype) {
    kernel_fail(spec, "input " + std::to_string(i) + " has dtype " + std::string(dtype_name(spec.inputs[i].dtype)) +
                          ", expected " + std::string(dtype_name(spec.inputs[reference].dtype)) + " like input " +
                          std::to_string(reference));
  }
}

// Output `k` must be declared with this dtype and these sizes (the caller allocates it so).
inline void require_output(const KernelSpec& spec, size_t k, DType dtype, const std::vector<int64_t>& sizes) {
  if (k >= spec.outputs.size() || !spec.outputs[k].present())
    kernel_fail(spec, "output " + std::to_string(k) + " is required");
  const TensorDesc& out = spec.outputs[k];
  if (out.dtype != dtype || out.sizes != sizes) {
    kernel_fail(spec, "output " + std::to_string(k) + " is declared " + std::string(dtype_name(out.dtype)) +
                          sizes_to_string(out.sizes) + ", the op computes " + std::string(dtype_name(dtype)) +
                          sizes_to_string(sizes));
  }
}

// Numpy broadcast of two size lists, or fails naming both.
inline std::vector<int64_t> broadcast_sizes_or_fail(const KernelSpec& spec, const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t k = 0; k < rank; ++k) {
    const int64_t da = k < rank - a.size() ? 1 : a[k - (rank - a.size())];
    const int64_t db = k < rank - b.size() ? 1 : b[k - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      kernel_fail(spec, "sizes " + sizes_to_string(a) + " and " + sizes_to_string(b) + " do not broadcast");
    }
    out[k] = da == 1 ? db : da;
  }
  return out;
}

// Normalises an axis into [0, rank) or fails.
inline int64_t normalized_axis(const KernelSpec& spec, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    kernel_fail(spec, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
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

// Truncates to bfloat16 as ONNX 1.12's Cast reference (and onnxtrain's constant folding) does; NaN stays NaN.
inline uint16_t float_to_bfloat16_bits(float f) {
  if (std::isnan(f)) return std::signbit(f) ? 0xffc0 : 0x7fc0;
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace onnxtrain::reference::elementwise
