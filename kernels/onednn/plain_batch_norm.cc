// The plain-layout training BatchNormalization and its gradient (plain_batch_norm.h).
#include "kernels/onednn/plain_batch_norm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "graph/fused_activation.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/losses_norm_common.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/primitive_kernel.h"
#include "kernels/onednn/primitive_sequence_kernel.h"

namespace onnxtrain::onednn {
namespace {

constexpr int64_t kChannelBlock = 16;

// X (N, C, P) with P the product of the spatial sizes.
struct ChannelGeometry {
  int64_t n = 0, c = 0, p = 1;
  int64_t per_channel() const { return n * p; }

  static ChannelGeometry of(const std::vector<int64_t>& sizes) {
    ChannelGeometry g{.n = sizes[0], .c = sizes[1]};
    for (size_t d = 2; d < sizes.size(); ++d) g.p *= sizes[d];
    return g;
  }
};

// Calls fn(c0, c1) for every block of channels [c0, c1), the blocks split over the threads.
template <typename Fn>
void for_each_channel_block(const ChannelGeometry& g, Fn&& fn) {
  const int64_t blocks = (g.c + kChannelBlock - 1) / kChannelBlock;
  cpu::parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) fn(b * kChannelBlock, std::min(g.c, (b + 1) * kChannelBlock));
  });
}

// The lanes of a block [c0, c1) and the index a per-element lambda gets for its coefficients. Rows of
// P >= 16 values go in SIMD lanes along each sample's row, and P = 1 across the block's channels (then
// contiguous): both index coefficients per channel, j = c - c0. Planes of 2 to 15 positions (layer3's
// 2x2 in ResNet-18 at 32x32) would leave most lanes of a row empty, so the lanes go along a sample's
// whole block, (c1 - c0)·P contiguous values, and index coefficients per value: each is expanded into a
// table first (expand()).
constexpr int64_t kMaxSmallPlane = 15;
constexpr int64_t kMaxLanes = kChannelBlock * kMaxSmallPlane;

ONNXTRAIN_CPU_INLINE bool small_plane(const ChannelGeometry& g) { return g.p > 1 && g.p <= kMaxSmallPlane; }

// Per-channel values v[0, c1 - c0) as the lanes index them, into table[0, kMaxLanes).
ONNXTRAIN_CPU_INLINE void expand(const ChannelGeometry& g, int64_t c0, int64_t c1, const float* v, float* table) {
  if (!small_plane(g)) {
    std::copy(v, v + (c1 - c0), table);
    return;
  }
  for (int64_t j = 0; j < c1 - c0; ++j) std::fill(table + j * g.p, table + (j + 1) * g.p, v[j]);
}

// Per channel j = c - c0 of [c0, c1): sums[j] = the sum of term(at, lane) over its elements, `at` an
// element's index in (N, C, P), `lane` as above; with a second term, second_sums[j] the sum of that one,
// in the same pass (the gradient's Σ dY and Σ dY·(x − μ) read dY once). Each sample's row is a float sum
// in SIMD lanes, added up in double; with P = 1 the lanes go across the block's channels, each summed in
// double; with small planes each value of the block is summed in float over up to 32 samples, those sums
// added up in double.
template <typename Term, typename SecondTerm>
ONNXTRAIN_CPU_INLINE void channel_sums(const ChannelGeometry& g, int64_t c0, int64_t c1, double* sums, Term&& term,
                                       double* second_sums, SecondTerm&& second_term) {
  constexpr bool kTwo = !std::is_same_v<std::decay_t<SecondTerm>, std::nullptr_t>;
  std::fill(sums, sums + (c1 - c0), 0.0);
  if constexpr (kTwo) std::fill(second_sums, second_sums + (c1 - c0), 0.0);
  if (small_plane(g)) {
    const int64_t lanes = (c1 - c0) * g.p;
    // Float sums over runs of kSamplesPerFloatSum samples, each run's added up in double: the float
    // error stays that of a short sum however large the batch.
    constexpr int64_t kSamplesPerFloatSum = 32;
    for (int64_t s0 = 0; s0 < g.n; s0 += kSamplesPerFloatSum) {
      float per_value[kMaxLanes] = {}, second_per_value[kMaxLanes] = {};
      for (int64_t s = s0; s < std::min(g.n, s0 + kSamplesPerFloatSum); ++s) {
        const int64_t base = (s * g.c + c0) * g.p;
#pragma omp simd
        for (int64_t k = 0; k < lanes; ++k) {
          per_value[k] += term(base + k, k);
          if constexpr (kTwo) second_per_value[k] += second_term(base + k, k);
        }
      }
      for (int64_t k = 0; k < lanes; ++k) {
        sums[k / g.p] += per_value[k];
        if constexpr (kTwo) second_sums[k / g.p] += second_per_value[k];
      }
    }
    return;
  }
  for (int64_t s = 0; s < g.n; ++s) {
    if (g.p == 1) {
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) {
        sums[c - c0] += term(s * g.c + c, c - c0);
        if constexpr (kTwo) second_sums[c - c0] += second_term(s * g.c + c, c - c0);
      }
      continue;
    }
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t row = (s * g.c + c) * g.p;
      float sum = 0, second = 0;
#pragma omp simd reduction(+ : sum, second)
      for (int64_t i = 0; i < g.p; ++i) {
        sum += term(row + i, c - c0);
        if constexpr (kTwo) second += second_term(row + i, c - c0);
      }
      sums[c - c0] += sum;
      if constexpr (kTwo) second_sums[c - c0] += second;
    }
  }
}

template <typename Term>
ONNXTRAIN_CPU_INLINE void channel_sums(const ChannelGeometry& g, int64_t c0, int64_t c1, double* sums, Term&& term) {
  channel_sums(g, c0, c1, sums, term, nullptr, nullptr);
}

// Calls fn(at, lane) for every element of channels [c0, c1) (at, lane as channel_sums).
template <typename Fn>
ONNXTRAIN_CPU_INLINE void for_each_element(const ChannelGeometry& g, int64_t c0, int64_t c1, Fn&& fn) {
  for (int64_t s = 0; s < g.n; ++s) {
    if (small_plane(g)) {
      const int64_t base = (s * g.c + c0) * g.p, lanes = (c1 - c0) * g.p;
#pragma omp simd
      for (int64_t k = 0; k < lanes; ++k) fn(base + k, k);
      continue;
    }
    if (g.p == 1) {
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) fn(s * g.c + c, c - c0);
      continue;
    }
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t row = (s * g.c + c) * g.p;
#pragma omp simd
      for (int64_t i = 0; i < g.p; ++i) fn(row + i, c - c0);
    }
  }
}

// The batch mean and population variance of channels [c0, c1) of x into mean[c - c0], var[c - c0].
ONNXTRAIN_CPU_INLINE void block_statistics(const ChannelGeometry& g, const float* x, int64_t c0, int64_t c1,
                                           float* mean, float* var) {
  double sums[kChannelBlock];
  const auto count = static_cast<double>(g.per_channel());
  // The mean first, then the variance around it (as the reference kernel): X's block is in the cache.
  channel_sums(g, c0, c1, sums, [&](int64_t at, int64_t) ONNXTRAIN_CPU_LAMBDA { return x[at]; });
  for (int64_t j = 0; j < c1 - c0; ++j) mean[j] = static_cast<float>(sums[j] / count);
  float mean_lanes[kMaxLanes];
  expand(g, c0, c1, mean, mean_lanes);
  channel_sums(g, c0, c1, sums, [&](int64_t at, int64_t lane) ONNXTRAIN_CPU_LAMBDA {
    const float d = x[at] - mean_lanes[lane];
    return d * d;
  });
  for (int64_t j = 0; j < c1 - c0; ++j) var[j] = static_cast<float>(sums[j] / count);
}

// The forward of channels [c0, c1): their batch statistics into mean/var (indexed by c), and Y.
// The per-block functions are cloned for AVX-512 and AVX2 (ONNXTRAIN_CPU_CLONES): built for the baseline
// ISA, these loops ran on 4-wide SSE (ResNet-18's 2x2 planes at 0.2 of oneDNN's blocked batch norm).
ONNXTRAIN_CPU_CLONES void forward_block(const ChannelGeometry& g, const float* x, const float* scale, const float* bias,
                                        float epsilon, bool relu, int64_t c0, int64_t c1, float* mean, float* var,
                                        float* y) {
  block_statistics(g, x, c0, c1, mean + c0, var + c0);
  float a[kChannelBlock], b[kChannelBlock];  // y = x·a + b
  for (int64_t c = c0; c < c1; ++c) {
    a[c - c0] = scale[c] / std::sqrt(var[c] + epsilon);
    b[c - c0] = bias[c] - mean[c] * a[c - c0];
  }
  float a_lanes[kMaxLanes], b_lanes[kMaxLanes];
  expand(g, c0, c1, a, a_lanes);
  expand(g, c0, c1, b, b_lanes);
  // With the Relu fused (graph/autodiff/batch_norm_relu.h) the floor is 0, else -inf, which max keeps.
  const float floor = relu ? 0.0f : -std::numeric_limits<float>::infinity();
  for_each_element(g, c0, c1, [&](int64_t at, int64_t lane) ONNXTRAIN_CPU_LAMBDA {
    y[at] = std::max(x[at] * a_lanes[lane] + b_lanes[lane], floor);
  });
}

// The gradient of channels [c0, c1) (dX = k1·dY − k2 − (x − μ)·k3), from the forward's statistics `kept`
// (all C means, then all C variances; nullptr: computed here). dx, dscale, dbias may be null. `relu_out`:
// the fused Relu's output, which counts dY only where it is positive (kRelu; a select, so the loops stay
// vectorised).
template <bool kRelu>
ONNXTRAIN_CPU_INLINE void backward_block(const ChannelGeometry& g, const float* dy_in, const float* relu_out,
                                         const float* x, const float* scale, float epsilon, const float* kept,
                                         int64_t c0, int64_t c1, float* dx, float* dscale, float* dbias) {
  auto dy = [&](int64_t at) ONNXTRAIN_CPU_LAMBDA {
    if constexpr (kRelu) return relu_out[at] > 0.0f ? dy_in[at] : 0.0f;
    return dy_in[at];
  };
  const auto count = static_cast<double>(g.per_channel());
  float mean[kChannelBlock], var[kChannelBlock];
  if (kept) {
    std::copy(kept + c0, kept + c1, mean);
    std::copy(kept + g.c + c0, kept + g.c + c1, var);
  } else {
    block_statistics(g, x, c0, c1, mean, var);
  }
  float mean_lanes[kMaxLanes];
  expand(g, c0, c1, mean, mean_lanes);
  double sum_dy[kChannelBlock], sum_dy_xc[kChannelBlock];  // Σ dY, Σ dY·(x − μ)
  channel_sums(
      g, c0, c1, sum_dy, [&](int64_t at, int64_t) ONNXTRAIN_CPU_LAMBDA { return dy(at); }, sum_dy_xc,
      [&](int64_t at, int64_t lane) ONNXTRAIN_CPU_LAMBDA { return dy(at) * (x[at] - mean_lanes[lane]); });
  float k1[kChannelBlock], k2[kChannelBlock], k3[kChannelBlock];
  for (int64_t c = c0; c < c1; ++c) {
    const int64_t j = c - c0;
    const double inv_std = 1.0 / std::sqrt(static_cast<double>(var[j]) + epsilon);
    if (dscale) dscale[c] = static_cast<float>(sum_dy_xc[j] * inv_std);
    if (dbias) dbias[c] = static_cast<float>(sum_dy[j]);
    const double a = scale[c] * inv_std;
    k1[j] = static_cast<float>(a);
    k2[j] = static_cast<float>(a * sum_dy[j] / count);
    k3[j] = static_cast<float>(a * inv_std * inv_std * sum_dy_xc[j] / count);
  }
  if (!dx) return;
  float k1_lanes[kMaxLanes], k2_lanes[kMaxLanes], k3_lanes[kMaxLanes];
  expand(g, c0, c1, k1, k1_lanes);
  expand(g, c0, c1, k2, k2_lanes);
  expand(g, c0, c1, k3, k3_lanes);
  for_each_element(g, c0, c1, [&](int64_t at, int64_t lane) ONNXTRAIN_CPU_LAMBDA {
    dx[at] = k1_lanes[lane] * dy(at) - k2_lanes[lane] - (x[at] - mean_lanes[lane]) * k3_lanes[lane];
  });
}

// The two instances, each cloned for AVX-512 and AVX2 (ONNXTRAIN_CPU_CLONES does not take templates).
ONNXTRAIN_CPU_CLONES void backward_block_plain(const ChannelGeometry& g, const float* dy, const float* x,
                                               const float* scale, float epsilon, const float* kept, int64_t c0,
                                               int64_t c1, float* dx, float* dscale, float* dbias) {
  backward_block<false>(g, dy, nullptr, x, scale, epsilon, kept, c0, c1, dx, dscale, dbias);
}
ONNXTRAIN_CPU_CLONES void backward_block_relu(const ChannelGeometry& g, const float* dy, const float* relu_out,
                                              const float* x, const float* scale, float epsilon, const float* kept,
                                              int64_t c0, int64_t c1, float* dx, float* dscale, float* dbias) {
  backward_block<true>(g, dy, relu_out, x, scale, epsilon, kept, c0, c1, dx, dscale, dbias);
}

class PlainBatchNormKernel final : public Kernel, public ReportsImplementation {
 public:
  explicit PlainBatchNormKernel(const KernelSpec& spec)
      : g_(ChannelGeometry::of(spec.inputs[0].sizes)),
        epsilon_(static_cast<float>(spec.attributes.get_float("epsilon", 1e-5))),
        momentum_(spec.attributes.get_float("momentum", 0.9)),
        relu_(fuses_relu(spec.attributes)),
        key_(batch_statistics_key(g_.c)),
        mean_(static_cast<size_t>(g_.c)),
        var_(static_cast<size_t>(g_.c)) {}

  std::string library_implementation() const override { return "plain-layout loops (no oneDNN primitive)"; }

  void run(Stream& stream, std::span<const TensorView> in, std::span<const TensorView> out) override {
    const float* x = in[0].as<const float>();
    const float* scale = in[1].as<const float>();
    const float* bias = in[2].as<const float>();
    float* y = out[0].as<float>();
    for_each_channel_block(g_, [&](int64_t c0, int64_t c1) {
      forward_block(g_, x, scale, bias, epsilon_, relu_, c0, c1, mean_.data(), var_.data(), y);
    });
    store_statistics(in, out);
    if (stream.keeps_derived_values()) keep_norm_statistics(stream, x, key_, mean_.data(), var_.data(), g_.c);
  }

 private:
  // The running statistics input·momentum + batch·(1 − momentum) (ONNX's rule, the population variance,
  // as the reference kernel), and before opset 14 the batch ones (saved mean and variance).
  void store_statistics(std::span<const TensorView> in, std::span<const TensorView> out) const {
    const float* input_mean = in[3].as<const float>();
    const float* input_var = in[4].as<const float>();
    auto store = [&](size_t i, auto value) {
      if (i >= out.size() || out[i].data == nullptr) return;
      float* o = out[i].as<float>();
      for (int64_t c = 0; c < g_.c; ++c) o[c] = static_cast<float>(value(c));
    };
    store(1, [&](int64_t c) { return input_mean[c] * momentum_ + mean_[c] * (1 - momentum_); });
    store(2, [&](int64_t c) { return input_var[c] * momentum_ + var_[c] * (1 - momentum_); });
    store(3, [&](int64_t c) { return mean_[c]; });
    store(4, [&](int64_t c) { return var_[c]; });
  }

  ChannelGeometry g_;
  float epsilon_;
  double momentum_;
  bool relu_;  // a fused Relu (graph/autodiff/batch_norm_relu.h)
  std::string key_;
  std::vector<float> mean_, var_;
};

// dX = scale/sqrt(σ² + ε)·(dY − mean(dY) − x̂·mean(dY·x̂)), dScale = Σ dY·x̂, dB = Σ dY.
class PlainBatchNormGradKernel final : public Kernel, public ReportsImplementation {
 public:
  explicit PlainBatchNormGradKernel(const KernelSpec& spec)
      : g_(ChannelGeometry::of(spec.inputs[1].sizes)),
        epsilon_(static_cast<float>(spec.attributes.get_float("epsilon", 1e-5))),
        relu_(fuses_relu(spec.attributes) && spec.inputs.size() > 5 && spec.inputs[5].present()),
        key_(batch_statistics_key(g_.c)) {
    for (size_t i = 0; i < 3; ++i) wanted_[i] = i < spec.outputs.size() && spec.outputs[i].present();
  }

  std::string library_implementation() const override { return "plain-layout loops (no oneDNN primitive)"; }

  void run(Stream& stream, std::span<const TensorView> in, std::span<const TensorView> out) override {
    const float* dy = in[0].as<const float>();
    const float* x = in[1].as<const float>();
    const float* scale = in[2].as<const float>();
    const float* relu_out = relu_ ? in[5].as<const float>() : nullptr;
    float* dx = wanted_[0] ? out[0].as<float>() : nullptr;
    float* dscale = wanted_[1] ? out[1].as<float>() : nullptr;
    float* dbias = wanted_[2] ? out[2].as<float>() : nullptr;
    const Stream::Derived kept = stream.derived(x, key_);  // the forward's statistics
    const float* stats = kept ? reinterpret_cast<const float*>(kept->data()) : nullptr;
    for_each_channel_block(g_, [&](int64_t c0, int64_t c1) {
      if (relu_out) {
        backward_block_relu(g_, dy, relu_out, x, scale, epsilon_, stats, c0, c1, dx, dscale, dbias);
      } else {
        backward_block_plain(g_, dy, x, scale, epsilon_, stats, c0, c1, dx, dscale, dbias);
      }
    });
  }

 private:
  ChannelGeometry g_;
  float epsilon_;
  bool relu_;  // dY masked by the fused Relu's output, input 5
  std::string key_;
  bool wanted_[3] = {false, false, false};
};

// Float32 throughout, per-channel scale, rank 3..5, nothing empty.
bool plain_case(const KernelSpec& spec, size_t x_input, bool training) {
  const std::vector<int64_t>& x = spec.inputs[x_input].sizes;
  return training && all_float32_nonempty(spec) && x.size() >= 3 && x.size() <= 5 &&
         spec.inputs[x_input + 1].numel() == x[1];
}

}  // namespace

std::unique_ptr<Kernel> make_plain_batch_norm(const KernelSpec& spec, bool training) {
  if (!plain_case(spec, 0, training)) return nullptr;
  return std::make_unique<PlainBatchNormKernel>(spec);
}

std::unique_ptr<Kernel> make_plain_batch_norm_grad(const KernelSpec& spec, bool training) {
  if (!plain_case(spec, 1, training)) return nullptr;
  return std::make_unique<PlainBatchNormGradKernel>(spec);
}

}  // namespace onnxtrain::onednn
