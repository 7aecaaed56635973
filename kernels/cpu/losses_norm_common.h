// What the "cpu" loss and normalisation kernels (losses.cc, losses_grad.cc, instance_norm*.cc) share:
// float exp and log written so that `#pragma omp simd` loops vectorise them (Cephes' polynomials, a few
// ulp from std::exp/std::log, no calls), hot loops compiled for AVX-512, AVX2 and baseline x86-64 and
// picked at load time (ONNXTRAIN_CPU_CLONES: the build targets baseline x86-64), a parallel loop whose
// body knows its chunk (per-chunk partial sums, reduced in chunk order), and the fallback to the
// reference kernel for what a cpu kernel does not implement. Also InstanceNormalization's plane moments.
//
//   ONNXTRAIN_CPU_CLONES void row_sum_exp(const float* x, int64_t n, float max, float* sum);
//   std::vector<Partial> partials(max_chunks());
//   parallel_chunks(rows, grain, [&](int chunk, int64_t begin, int64_t end) { partials[chunk] += ...; });
#pragma once

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>

#include "graph/error.h"
#include "kernels/kernel.h"

// No clones under ThreadSanitizer: their ifunc resolvers run before TSan is initialised and crash.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define ONNXTRAIN_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ONNXTRAIN_CPU_CLONES
#endif
#define ONNXTRAIN_CPU_INLINE __attribute__((always_inline)) inline
// The same for a lambda called in such a function's loop: `[&](int64_t i) ONNXTRAIN_CPU_LAMBDA { ... }`.
#define ONNXTRAIN_CPU_LAMBDA __attribute__((always_inline))

namespace onnxtrain::cpu {

// The helpers below are always inlined (ONNXTRAIN_CPU_INLINE): GCC does not inline a plain inline function
// into the AVX clones of ONNXTRAIN_CPU_CLONES functions, and a call in a loop stops it from vectorising.
// They are branch-free (integer and bit arithmetic instead of conditionals) for the same reason.

ONNXTRAIN_CPU_INLINE float bits_to_float(int32_t i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
ONNXTRAIN_CPU_INLINE int32_t float_to_bits(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}

// e^x; 0 below about -87.3 (where e^x leaves the normal floats) and for -inf, inf above about 88.7, NaN
// for NaN. Relative error below 1e-7.
ONNXTRAIN_CPU_INLINE float exp_simd(float x) {
  // n = round(x / ln 2) by the 1.5·2^23 trick, clamped to [-126, 127]; r = x - n·ln 2 in two parts
  // (Cody-Waite); e^r by Cephes' expf polynomial; 2^n from the exponent bits.
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const int32_t rounded = float_to_bits(shifted) - float_to_bits(12582912.0f);
  const int32_t below = rounded + 126;
  const int32_t keep = ~(below >> 31);  // 0 when e^x is below the normal floats
  int32_t n = rounded - (below & (below >> 31));
  const int32_t above = n - 127;
  n -= above & ~(above >> 31);
  const float fn = static_cast<float>(n);
  const float r = x - fn * 0.693359375f + fn * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float result = (p * r * r + r + 1.0f) * bits_to_float((n + 127) << 23);
  return bits_to_float(float_to_bits(result) & keep);
}

// ln x for positive normal x (sums of exponentials here: always >= 1). Relative error below 1e-7.
ONNXTRAIN_CPU_INLINE float log_simd(float x) {
  // x = m·2^e with m in [sqrt(1/2), sqrt(2)), ln x = ln m + e·ln 2, ln m by Cephes' logf polynomial.
  const int32_t bits = float_to_bits(x);
  const int32_t mantissa = (bits & 0x007fffff) | 0x3f000000;  // m' in [0.5, 1)
  const int32_t small = (mantissa - 0x3f3504f3) >> 31;        // -1 when m' < sqrt(1/2): m = 2m'
  const float fe = static_cast<float>(((bits >> 23) & 0xff) - 126 + small);
  const float m = bits_to_float(mantissa) + bits_to_float(mantissa & small) - 1.0f;  // m - 1
  const float z = m * m;
  float p = 7.0376836292e-2f;
  p = p * m - 1.1514610310e-1f;
  p = p * m + 1.1676998740e-1f;
  p = p * m - 1.2420140846e-1f;
  p = p * m + 1.4249322787e-1f;
  p = p * m - 1.6668057665e-1f;
  p = p * m + 2.0000714765e-1f;
  p = p * m - 2.4999993993e-1f;
  p = p * m + 3.3333331174e-1f;
  const float y = p * m * z + fe * -2.12194440e-4f - 0.5f * z;
  return m + y + fe * 0.693359375f;
}

// Mean and 1/sqrt(population variance + epsilon) of an InstanceNormalization plane, in double and two
// passes as reference::moments_of computes them, but vectorised.
struct PlaneMoments {
  double mean = 0, inv_std = 0;
};
ONNXTRAIN_CPU_INLINE PlaneMoments plane_moments(const float* x, int64_t count, double epsilon) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < count; ++i) sum += static_cast<double>(x[i]);
  const double mean = sum / static_cast<double>(count);
  double squares = 0;
#pragma omp simd reduction(+ : squares)
  for (int64_t i = 0; i < count; ++i) {
    const double d = static_cast<double>(x[i]) - mean;
    squares += d * d;
  }
  return {mean, 1.0 / std::sqrt(squares / static_cast<double>(count) + epsilon)};
}

// Elements of planes per task of the instance-norm kernels.
constexpr int64_t kPlaneGrain = 16384;

// The most chunks parallel_chunks splits a range into (the OpenMP threads).
inline int max_chunks() { return omp_get_max_threads(); }

// Runs fn(chunk, begin, end) over [0, n) in at most max_chunks() chunks of at least `grain` items, chunk
// numbers 0, 1, ... in the order of the ranges; inline when there is one chunk. Returns the chunk count.
template <typename Fn>
int parallel_chunks(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return 0;
  grain = grain < 1 ? 1 : grain;
  const int64_t by_grain = (n + grain - 1) / grain;
  const int chunks = static_cast<int>(by_grain < max_chunks() ? by_grain : max_chunks());
  if (chunks <= 1) {
    fn(0, int64_t{0}, n);
    return 1;
  }
#pragma omp parallel for num_threads(chunks) schedule(static)
  for (int c = 0; c < chunks; ++c) fn(c, n * c / chunks, n * (c + 1) / chunks);
  return chunks;
}

// The registered reference kernel for `spec`: the oracle whose prepare-time checks the cpu kernels reuse
// (so that both reject the same specs) and what they return for a configuration they do not implement.
inline std::unique_ptr<Kernel> reference_kernel(const KernelSpec& spec) {
  const KernelEntry* entry =
      KernelRegistry::builtin().find(spec.domain, spec.op_type, DeviceKind::Cpu, kernel_dtype(spec), "reference");
  if (!entry) throw Error(spec.op_type + ": no reference kernel to fall back on");
  return entry->prepare(spec);
}

}  // namespace onnxtrain::cpu
