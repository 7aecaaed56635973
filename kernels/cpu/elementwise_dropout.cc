// "cpu" kernels of Dropout and ai.onnxtrain::DropoutGrad, float32. Dropout draws the reference kernel's
// masks bit for bit (kernels/reference/dropout.cc): element i of run r is kept where its Philox4x32-10
// draw (kernels/philox.h, stream seed random_stream_seed(`seed`, r)) satisfies draw·2^-53 >= ratio, which
// is the exact integer test draw >= ceil(ratio·2^53). Draw i depends on i alone, so each thread draws and
// scales its own range in one pass (a block of Philox gives two draws; AVX2 intrinsics run 32 blocks at a
// time, the baseline build an auto-vectorised loop). Y and dX are float(double(x)·(1/(1-ratio))), as in
// the reference. Other dtypes run the reference kernel.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise_broadcast.h"
#include "kernels/philox.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace onnxtrain {
namespace {

using namespace cpu;
using namespace cpu::elementwise;

bool has(std::span<const TensorView> views, size_t i) { return i < views.size() && views[i].data != nullptr; }

double scalar(const TensorView& v) {
  return v.dtype == DType::Float64 ? *v.as<const double>() : static_cast<double>(*v.as<const float>());
}

// y[i] = keep[i] ? float(double(x[i]) * scale) : 0 over one range; scale_kept runs it across threads.
void scale_kept_segment(const float* x, const uint8_t* keep, double scale, float* y, int64_t n) {
  binary_segment(x, true, keep, true, y, n, [scale](float v, uint8_t k) {
    return select_float(k != 0, static_cast<float>(static_cast<double>(v) * scale), 0.0f);
  });
}

void scale_kept(const float* x, const uint8_t* keep, double scale, float* y, int64_t count) {
  parallel_for(count, kCheapGrain, [&](int64_t begin, int64_t end) {
    scale_kept_segment(x + begin, keep + begin, scale, y + begin, end - begin);
  });
}

// keep[k] = (draw(first + k) >= threshold) for k in [0, n): the Philox draws of kernels/philox.h, one
// block per pair of elements, with the exact integer form of dropout_keeps (threshold = ceil(ratio·2^53)).
// The pair loop vectorises (32x32->64 multiplies are vpmuludq/pmuludq): 53-bit draw >= threshold is the
// unshifted 64-bit word (high:low) >= threshold·2^11, compared in 32-bit halves (SSE2 and AVX2 have no
// unsigned 64-bit compare). Each pair's two results are stored as one little-endian uint16_t.
__attribute__((always_inline)) inline void draw_keep_loops(uint64_t stream_seed, uint64_t first, uint8_t* keep,
                                                           int64_t n, uint64_t threshold) {
  static_assert(std::endian::native == std::endian::little, "pairs of keep bytes are stored as one uint16_t");
  if (n <= 0) return;
  if ((first & 1) != 0) {  // an odd first element: the odd half of its block
    *keep++ = dropout_draw(stream_seed, first++) >= threshold;
    --n;
  }
  const uint64_t shifted = threshold << 11;  // threshold < 2^53: no bits lost
  const auto th = static_cast<uint32_t>(shifted >> 32), tl = static_cast<uint32_t>(shifted);
  const auto k0 = static_cast<uint32_t>(stream_seed), k1 = static_cast<uint32_t>(stream_seed >> 32);
  constexpr int64_t kPairs = 256;
  alignas(64) uint16_t both[kPairs];
  while (n >= 2) {
    const uint64_t pair = first / 2;
    const auto low = static_cast<uint32_t>(pair), high = static_cast<uint32_t>(pair >> 32);
    // Pairs of one chunk share the counter's high word (a chunk ends where the low word wraps).
    const int64_t m = std::min<int64_t>({kPairs, n / 2, (int64_t{1} << 32) - int64_t{low}});
#pragma omp simd
    for (int64_t j = 0; j < m; ++j) {
      const Philox4x32Block r = philox4x32_10({{low + static_cast<uint32_t>(j), high, 0u, 0u}}, k0, k1);
      const uint32_t even = (r.v[1] > th) | ((r.v[1] == th) & (r.v[0] >= tl));
      const uint32_t odd = (r.v[3] > th) | ((r.v[3] == th) & (r.v[2] >= tl));
      both[j] = static_cast<uint16_t>(even | (odd << 8));
    }
    std::memcpy(keep, both, static_cast<size_t>(m) * sizeof(uint16_t));
    keep += 2 * m;
    first += static_cast<uint64_t>(2 * m);
    n -= 2 * m;
  }
  if (n == 1) *keep = dropout_draw(stream_seed, first) >= threshold;
}

#if defined(__x86_64__) && defined(__GNUC__)
// 1 in each 32-bit lane where (high:low) >= (th:tl) as unsigned 64-bit words, else 0 (AVX2 compares are
// signed: both sides are offset by 2^31, `sign`; th_s and tl_s are th and tl so offset).
ONNXTRAIN_ELEMENTWISE_AVX2 __attribute__((always_inline)) inline __m256i at_least(__m256i high, __m256i low, __m256i th,
                                                                                  __m256i th_s, __m256i tl_s,
                                                                                  __m256i sign) {
  const __m256i gt = _mm256_cmpgt_epi32(_mm256_xor_si256(high, sign), th_s);
  const __m256i eq = _mm256_cmpeq_epi32(high, th);
  const __m256i low_less = _mm256_cmpgt_epi32(tl_s, _mm256_xor_si256(low, sign));
  return _mm256_and_si256(_mm256_or_si256(gt, _mm256_andnot_si256(low_less, eq)), _mm256_set1_epi32(1));
}

// draw_keep_loops with AVX2 intrinsics: philox4x32_10 on 8 counters per vector (the even and odd 32-bit
// lanes' 32x32->64 products are two vpmuludq, recombined by blends), 4 vectors in flight to hide the
// multiplies' latency: 64 elements per step, about 4x the auto-vectorised loop (which GCC fills with shuffles).
// The edges (an odd first element, the last < 64 elements, a wrap of the counter's low word) run
// draw_keep_loops. Bit for bit the same draws: the tests compare both builds with the reference kernel.
ONNXTRAIN_ELEMENTWISE_AVX2 void draw_keep_avx2(uint64_t stream_seed, uint64_t first, uint8_t* keep, int64_t n,
                                               uint64_t threshold) {
  constexpr int kGroups = 4;  // vectors of 8 blocks in flight
  if (n > 0 && (first & 1) != 0) {
    *keep++ = dropout_draw(stream_seed, first++) >= threshold;
    --n;
  }
  const uint64_t shifted = threshold << 11;  // threshold < 2^53: no bits lost
  const __m256i sign = _mm256_set1_epi32(INT32_MIN);
  const __m256i th = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(shifted >> 32)));
  const __m256i th_s = _mm256_xor_si256(th, sign);
  const __m256i tl_s = _mm256_xor_si256(_mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(shifted))), sign);
  const __m256i m0 = _mm256_set1_epi32(static_cast<int32_t>(kPhiloxM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int32_t>(kPhiloxM1));
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  while (n >= 16 * kGroups) {
    const uint64_t pair = first / 2;
    const auto low = static_cast<uint32_t>(pair), high = static_cast<uint32_t>(pair >> 32);
    if (low > UINT32_MAX - (8 * kGroups - 1)) break;  // the low counter word wraps inside this step
    __m256i c0[kGroups], c1[kGroups], c2[kGroups], c3[kGroups];
    for (int g = 0; g < kGroups; ++g) {
      c0[g] = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(low + 8 * g)), lanes);
      c1[g] = _mm256_set1_epi32(static_cast<int32_t>(high));
      c2[g] = _mm256_setzero_si256();
      c3[g] = _mm256_setzero_si256();
    }
    auto key0 = static_cast<uint32_t>(stream_seed), key1 = static_cast<uint32_t>(stream_seed >> 32);
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        key0 += kPhiloxW0;
        key1 += kPhiloxW1;
      }
      const __m256i k0 = _mm256_set1_epi32(static_cast<int32_t>(key0));
      const __m256i k1 = _mm256_set1_epi32(static_cast<int32_t>(key1));
      for (int g = 0; g < kGroups; ++g) {
        const __m256i even0 = _mm256_mul_epu32(c0[g], m0), odd0 = _mm256_mul_epu32(_mm256_srli_epi64(c0[g], 32), m0);
        const __m256i even1 = _mm256_mul_epu32(c2[g], m1), odd1 = _mm256_mul_epu32(_mm256_srli_epi64(c2[g], 32), m1);
        const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(even0, 32), odd0, 0xAA);
        const __m256i lo0 = _mm256_blend_epi32(even0, _mm256_slli_epi64(odd0, 32), 0xAA);
        const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(even1, 32), odd1, 0xAA);
        const __m256i lo1 = _mm256_blend_epi32(even1, _mm256_slli_epi64(odd1, 32), 0xAA);
        c0[g] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[g]), k0);
        c2[g] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[g]), k1);
        c1[g] = lo1;
        c3[g] = lo0;
      }
    }
    for (int g = 0; g < kGroups; ++g) {  // keep bytes: even element in bits 0-7, odd in 8-15, then packed
      const __m256i pairs = _mm256_or_si256(at_least(c1[g], c0[g], th, th_s, tl_s, sign),
                                            _mm256_slli_epi32(at_least(c3[g], c2[g], th, th_s, tl_s, sign), 8));
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(pairs, pairs), 0x08);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(keep + 16 * g), _mm256_castsi256_si128(packed));
    }
    keep += 16 * kGroups;
    first += 16 * kGroups;
    n -= 16 * kGroups;
  }
  draw_keep_loops(stream_seed, first, keep, n, threshold);
}
#else
ONNXTRAIN_ELEMENTWISE_AVX2 void draw_keep_avx2(uint64_t stream_seed, uint64_t first, uint8_t* keep, int64_t n,
                                               uint64_t threshold) {
  draw_keep_loops(stream_seed, first, keep, n, threshold);
}
#endif

void draw_keep(uint64_t stream_seed, uint64_t first, uint8_t* keep, int64_t n, uint64_t threshold) {
  if (use_avx2) return draw_keep_avx2(stream_seed, first, keep, n, threshold);
  draw_keep_loops(stream_seed, first, keep, n, threshold);
}

class DropoutKernel final : public Kernel {
 public:
  DropoutKernel(bool ratio_is_input, double attribute_ratio, DType mask_dtype, uint64_t seed, int64_t count)
      : ratio_is_input_(ratio_is_input),
        attribute_ratio_(attribute_ratio),
        mask_dtype_(mask_dtype),
        seed_(seed),
        keep_(mask_dtype == DType::Bool ? 0 : static_cast<size_t>(count)) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* x = inputs[0].as<const float>();
    float* y = outputs[0].as<float>();
    const int64_t count = inputs[0].numel();
    double ratio = attribute_ratio_;
    bool training = false;
    if (ratio_is_input_) {
      if (has(inputs, 1)) ratio = scalar(inputs[1]);
      if (has(inputs, 2)) training = *inputs[2].as<const uint8_t>() != 0;
    }
    if (training && !(ratio >= 0 && ratio < 1)) {
      throw Error("Dropout kernel: ratio must be in [0, 1), got " + std::to_string(ratio));
    }
    const bool mask_out = mask_dtype_ != DType::Undefined && has(outputs, 1);
    uint8_t* keep = mask_dtype_ == DType::Bool && mask_out ? outputs[1].as<uint8_t>() : keep_.data();
    if (!(training && ratio > 0)) {  // every element kept, scale 1: a copy
      std::memcpy(y, x, static_cast<size_t>(count) * sizeof(float));
      if (mask_out) fill_mask(outputs[1], nullptr, count);
      return;
    }
    if (keep == nullptr) {  // bool mask not requested: draw into our own buffer
      keep_.resize(static_cast<size_t>(count));
      keep = keep_.data();
    }
    const auto threshold = static_cast<uint64_t>(std::ceil(ratio * 0x1.0p53));
    const uint64_t stream_seed = random_stream_seed(seed_, stream.run_index());
    const uint64_t offset = stream.draw_offset(count);
    const double scale = 1.0 / (1.0 - ratio);
    // Each thread draws and scales its own range: draw i depends on i alone.
    parallel_for(count, kCheapGrain, [&](int64_t begin, int64_t end) {
      draw_keep(stream_seed, offset + static_cast<uint64_t>(begin), keep + begin, end - begin, threshold);
      scale_kept_segment(x + begin, keep + begin, scale, y + begin, end - begin);
    });
    if (mask_out && mask_dtype_ != DType::Bool) fill_mask(outputs[1], keep, count);
  }

 private:
  // The mask output from keep (all true when keep is null), as bool bytes or float32 0/1.
  void fill_mask(const TensorView& mask, const uint8_t* keep, int64_t count) {
    if (mask_dtype_ == DType::Bool) {
      if (keep == nullptr) std::memset(mask.data, 1, static_cast<size_t>(count));
      return;
    }
    float* m = mask.as<float>();
    for (int64_t i = 0; i < count; ++i) m[i] = keep == nullptr || keep[i] != 0 ? 1.0f : 0.0f;
  }

  bool ratio_is_input_;
  double attribute_ratio_;
  DType mask_dtype_;
  uint64_t seed_;              // the `seed` attribute
  std::vector<uint8_t> keep_;  // the mask when it is not a bool output
};

std::unique_ptr<Kernel> make_dropout(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = elementwise_reference_kernel(spec);  // validates the spec
  if (spec.inputs[0].dtype != DType::Float32) return fallback;
  const DType mask_dtype = spec.outputs.size() > 1 ? spec.outputs[1].dtype : DType::Undefined;
  if (mask_dtype != DType::Undefined && mask_dtype != DType::Bool && mask_dtype != DType::Float32) return fallback;
  const bool ratio_is_input = spec.opset >= 12;
  const double attribute_ratio = ratio_is_input ? 0.5 : spec.attributes.get_float("ratio", 0.5);
  const auto seed = static_cast<uint64_t>(spec.attributes.get_int("seed", 0));
  return std::make_unique<DropoutKernel>(ratio_is_input, attribute_ratio, mask_dtype, seed, spec.inputs[0].numel());
}

class DropoutGradKernel final : public Kernel {
 public:
  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* dy = inputs[0].as<const float>();
    float* dx = outputs[0].as<float>();
    const int64_t count = inputs[0].numel();
    const bool training = !has(inputs, 3) || *inputs[3].as<const uint8_t>() != 0;
    if (!training) {
      std::memcpy(dx, dy, static_cast<size_t>(count) * sizeof(float));
      return;
    }
    const double ratio = has(inputs, 2) ? scalar(inputs[2]) : 0.5;
    if (!(ratio >= 0 && ratio < 1))
      throw Error("DropoutGrad kernel: ratio must be in [0, 1), got " + std::to_string(ratio));
    const double scale = 1.0 / (1.0 - ratio);
    if (inputs[1].dtype == DType::Bool) {
      scale_kept(dy, inputs[1].as<const uint8_t>(), scale, dx, count);
      return;
    }
    const float* mask = inputs[1].as<const float>();
    parallel_for(count, kCheapGrain, [&](int64_t begin, int64_t end) {
      binary_segment(dy + begin, true, mask + begin, true, dx + begin, end - begin, [scale](float v, float m) {
        return select_float(m != 0.0f, static_cast<float>(static_cast<double>(v) * scale), 0.0f);
      });
    });
  }
};

std::unique_ptr<Kernel> make_dropout_grad(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = elementwise_reference_kernel(spec);
  if (spec.inputs[0].dtype != DType::Float32) return fallback;
  return std::make_unique<DropoutGradKernel>();
}

}  // namespace

void register_cpu_elementwise_dropout_kernels(KernelRegistry& registry) {
  registry.add(cpu::cpu_entry("Dropout", {DType::Float32}, &make_dropout));
  registry.add(cpu::cpu_training_entry("DropoutGrad", {DType::Float32}, &make_dropout_grad));
}

}  // namespace onnxtrain
