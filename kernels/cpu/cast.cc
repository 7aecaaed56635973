// Cast and CastLike between every pair of fixed-size dtypes, with the reference kernel's rounding (float →
// integer truncates and saturates, NaN → 0; → float16 and bfloat16 round to nearest even, once; → bool
// is v != 0): one loop per (source, target) pair chosen at prepare time, split over the threads. float32
// ↔ float16/bfloat16 use branch-free bit arithmetic the compiler vectorises instead of frexp/ldexp; a
// cast to the same dtype is a memcpy where the reference kernel's round trip changes no bits.
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/data_movement.h"
#include "kernels/cpu/losses_norm_common.h"  // ONNXTRAIN_CPU_CLONES
#include "kernels/reference/element_convert.h"

namespace onnxtrain {

namespace {

using namespace cpu;

using reference::BFloat16Bits;
using reference::BoolByte;
using reference::dispatch_cast_storage;
using reference::HalfBits;

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Selects a where mask is all ones, b where it is zero: arithmetic the vectoriser keeps branch-free.
inline uint32_t select(uint32_t mask, uint32_t a, uint32_t b) { return (a & mask) | (b & ~mask); }
inline uint32_t mask_of(bool c) { return 0u - static_cast<uint32_t>(c); }

// float16 → float32, exact (NaN payloads kept); after M. Dukhan's FP16 library.
inline float half_to_float(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const float normalized = bits_float((two_w >> 4) + (0xe0u << 23)) * 0x1.0p-112f;
  const float denormalized = bits_float((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t finite =
      select(mask_of(static_cast<int32_t>(two_w >> 1) < (1 << 26)), float_bits(denormalized), float_bits(normalized));
  const uint32_t special = 0x7f800000u | ((w >> 3) & 0x007fe000u);  // inf / NaN as they are
  return bits_float(sign | select(mask_of(static_cast<int32_t>(h & 0x7c00u) == 0x7c00), special, finite));
}

// float32 → float16, round to nearest even, overflow to infinity, NaN → 0x7e00 with the sign (as the
// reference kernel's double_to_half_bits gives for a float32 value).
inline uint16_t float_to_half(float f) {
  float base = (std::fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t w = float_bits(f);
  const uint32_t sign = w & 0x80000000u;
  int32_t exponent = static_cast<int32_t>((w >> 23) & 0xffu);
  exponent = exponent < 0x71 ? 0x71 : exponent;
  base = bits_float((static_cast<uint32_t>(exponent) << 23) + 0x07800000u) + base;
  const uint32_t bits = float_bits(base);
  const uint32_t nonsign = ((bits >> 13) & 0x7c00u) + (bits & 0x0fffu);
  const bool nan = static_cast<int32_t>(w & 0x7fffffffu) > 0x7f800000;
  return static_cast<uint16_t>((sign >> 16) | select(mask_of(nan), 0x7e00u, nonsign));
}

// Round to nearest even: adding 0x7fff plus the kept low bit carries into the kept bits exactly when the
// dropped half is above one half, or one half with an odd kept bit (infinity stays infinity).
inline uint16_t float_to_bfloat16(float f) {
  const uint32_t w = float_bits(f);
  const bool nan = static_cast<int32_t>(w & 0x7fffffffu) > 0x7f800000;
  const uint32_t rounded = (w + 0x7fffu + ((w >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>(select(mask_of(nan), ((w >> 16) & 0x8000u) | 0x7fc0u, rounded));
}

// A stored element as a C++ arithmetic value.
template <typename S>
S plain(S v) {
  return v;
}
float plain(HalfBits v) { return half_to_float(v.bits); }
float plain(BFloat16Bits v) { return bits_float(static_cast<uint32_t>(v.bits) << 16); }
bool plain(BoolByte v) { return v.byte != 0; }

template <typename D, typename V>
D convert(V v) {
  if constexpr (std::is_same_v<D, HalfBits>) {
    if constexpr (std::is_same_v<V, float>) {
      return {float_to_half(v)};
    } else {
      return {reference::double_to_half_bits(static_cast<double>(v))};
    }
  } else if constexpr (std::is_same_v<D, BFloat16Bits>) {
    if constexpr (std::is_same_v<V, float>) {
      return {float_to_bfloat16(v)};
    } else {  // one rounding from the exact value, as the reference
      return {reference::double_to_bfloat16_bits(static_cast<double>(v))};
    }
  } else if constexpr (std::is_same_v<D, BoolByte>) {
    return {static_cast<uint8_t>(v != V(0) ? 1 : 0)};
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<V>) {
    constexpr double lo = static_cast<double>(std::numeric_limits<D>::lowest());
    constexpr double hi = static_cast<double>(std::numeric_limits<D>::max());
    const auto d = static_cast<double>(v);
    return d != d    ? D(0)
           : d <= lo ? std::numeric_limits<D>::lowest()
           : d >= hi ? std::numeric_limits<D>::max()
                     : static_cast<D>(d);
  } else {
    return static_cast<D>(v);
  }
}

using ConvertRange = void (*)(const void* x, void* y, int64_t begin, int64_t end);

template <typename S, typename D>
ONNXTRAIN_CPU_INLINE void convert_range(const void* x, void* y, int64_t begin, int64_t end) {
  const S* from = static_cast<const S*>(x);
  D* to = static_cast<D*>(y);
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) to[i] = convert<D>(plain(from[i]));
}

// The float32 <-> float16/bfloat16 pairs autocast runs around every product, also compiled for AVX-512 and
// AVX2 (the build targets baseline x86-64): their bit arithmetic is compute-bound on SSE2 (float32 to
// bfloat16 at 9.5 GB/s on one thread, cpu_data_movement_bench, README "Mixed precision").
ONNXTRAIN_CPU_CLONES void float_to_bfloat16_range(const void* x, void* y, int64_t begin, int64_t end) {
  convert_range<float, BFloat16Bits>(x, y, begin, end);
}
ONNXTRAIN_CPU_CLONES void bfloat16_to_float_range(const void* x, void* y, int64_t begin, int64_t end) {
  convert_range<BFloat16Bits, float>(x, y, begin, end);
}
ONNXTRAIN_CPU_CLONES void float_to_half_range(const void* x, void* y, int64_t begin, int64_t end) {
  convert_range<float, HalfBits>(x, y, begin, end);
}
ONNXTRAIN_CPU_CLONES void half_to_float_range(const void* x, void* y, int64_t begin, int64_t end) {
  convert_range<HalfBits, float>(x, y, begin, end);
}

ConvertRange converter(DType from, DType to) {
  if (from == DType::Float32 && to == DType::BFloat16) return &float_to_bfloat16_range;
  if (from == DType::BFloat16 && to == DType::Float32) return &bfloat16_to_float_range;
  if (from == DType::Float32 && to == DType::Float16) return &float_to_half_range;
  if (from == DType::Float16 && to == DType::Float32) return &half_to_float_range;
  ConvertRange fn = nullptr;
  dispatch_cast_storage(from, [&](auto source_zero) {
    dispatch_cast_storage(to,
                          [&](auto target_zero) { fn = &convert_range<decltype(source_zero), decltype(target_zero)>; });
  });
  return fn;
}

class CastKernel final : public CpuDataMovementKernel {
 public:
  explicit CastKernel(const KernelSpec& spec) : CpuDataMovementKernel(spec) {
    from_ = spec.inputs[0].dtype;
    to_ = spec.outputs[0].dtype;  // the reference kernel checked it is the cast's target
    // The same dtype is a copy, except where the reference kernel's round trip canonicalises (NaN
    // payloads of float16/bfloat16, bool bytes other than 0/1).
    copy_ = from_ == to_ && from_ != DType::Float16 && from_ != DType::BFloat16 && from_ != DType::Bool;
    if (!copy_) convert_ = converter(from_, to_);
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &x = inputs[0], &y = outputs[0];
    if (x.sizes != y.sizes || (!copy_ && !convert_)) return run_reference(stream, inputs, outputs);
    const int64_t n = x.numel();
    if (copy_) return parallel_copy(y.data, x.data, n * static_cast<int64_t>(reference::element_bytes(from_)));
    parallel_for(n, 16 * 1024, [&](int64_t begin, int64_t end) { convert_(x.data, y.data, begin, end); });
  }

 private:
  DType from_ = DType::Undefined, to_ = DType::Undefined;
  bool copy_ = false;
  ConvertRange convert_ = nullptr;
};

}  // namespace

void register_cpu_cast_kernels(KernelRegistry& registry) {
  registry.add(cpu_entry("Cast", reference::kFixedSizeDTypes, reference::make_kernel<CastKernel>));
  registry.add(cpu_entry("CastLike", reference::kFixedSizeDTypes, reference::make_kernel<CastKernel>));
}

}  // namespace onnxtrain
