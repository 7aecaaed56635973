// "cpu" kernels of Dropout and ai.onnxtrain::DropoutGrad, float32. Dropout keeps the reference kernel's
// RNG bit for bit (kernels/reference/dropout.cc): per run, one std::mt19937_64 sequence seeded by
// random_stream_seed(`seed`, run index) (drawn by MersenneTwister64 below, 312 at a time), one draw per
// element in order, kept where
// (draw >> 11)·2^-53 >= ratio, which is the exact integer test (draw >> 11) >= ceil(ratio·2^53). The
// draws are sequential; the scaling runs across threads. Y and dX are float(double(x)·(1/(1-ratio))),
// as in the reference. Other dtypes run the reference kernel.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise_broadcast.h"

namespace onnxtrain {
namespace {

using namespace cpu;
using namespace cpu::elementwise;

bool has(std::span<const TensorView> views, size_t i) { return i < views.size() && views[i].data != nullptr; }

double scalar(const TensorView& v) {
  return v.dtype == DType::Float64 ? *v.as<const double>() : static_cast<double>(*v.as<const float>());
}

// y[i] = keep[i] ? float(double(x[i]) * scale) : 0, across threads.
void scale_kept(const float* x, const uint8_t* keep, double scale, float* y, int64_t count) {
  parallel_for(count, kCheapGrain, [&](int64_t begin, int64_t end) {
    binary_segment(x + begin, true, keep + begin, true, y + begin, end - begin, [scale](float v, uint8_t k) {
      return select_float(k != 0, static_cast<float>(static_cast<double>(v) * scale), 0.0f);
    });
  });
}

// std::mt19937_64: the same draws for the same seed (the C++ standard fixes the algorithm, its parameters
// and its seeding), made a block of 312 at a time so that the twist and the tempering vectorise, where
// std::mt19937_64's operator() returns one draw per call.
class MersenneTwister64 {
 public:
  explicit MersenneTwister64(uint64_t seed) {
    x_[0] = seed;
    for (int i = 1; i < kN; ++i) x_[i] = 6364136223846793005ULL * (x_[i - 1] ^ (x_[i - 1] >> 62)) + i;
  }

  // keep[i] = (draw >> 11) >= threshold for each of the next n draws.
  void draw_keep(uint8_t* keep, int64_t n, uint64_t threshold) {
    if (use_avx2) return draw_keep_avx2(keep, n, threshold);
    draw_keep_loops(keep, n, threshold);
  }

 private:
  static constexpr int kN = 312, kM = 156;
  static constexpr uint64_t kA = 0xb5026f5aa96619e9ULL, kUpper = ~uint64_t{0} << 31, kLower = ~kUpper;

  static uint64_t temper(uint64_t z) {
    z ^= (z >> 29) & 0x5555555555555555ULL;
    z ^= (z << 17) & 0x71d67fffeda60000ULL;
    z ^= (z << 37) & 0xfff7eee000000000ULL;
    return z ^ (z >> 43);
  }
  static uint64_t mix(uint64_t high, uint64_t low, uint64_t far) {
    const uint64_t y = (high & kUpper) | (low & kLower);
    return far ^ (y >> 1) ^ ((uint64_t{0} - (y & 1)) & kA);
  }
  __attribute__((always_inline)) void twist() {
    for (int k = 0; k < kN - kM; ++k) x_[k] = mix(x_[k], x_[k + 1], x_[k + kM]);
    for (int k = kN - kM; k < kN - 1; ++k) x_[k] = mix(x_[k], x_[k + 1], x_[k + kM - kN]);
    x_[kN - 1] = mix(x_[kN - 1], x_[0], x_[kM - 1]);
    p_ = 0;
  }
  __attribute__((always_inline)) void draw_keep_loops(uint8_t* keep, int64_t n, uint64_t threshold) {
    // (draw >> 11) >= threshold in 32-bit halves: SSE2 has no 64-bit compare, so this vectorises.
    const auto th = static_cast<uint32_t>(threshold >> 32), tl = static_cast<uint32_t>(threshold);
    while (n > 0) {
      if (p_ == kN) twist();
      const int64_t k = std::min<int64_t>(kN - p_, n);
      const uint64_t* x = x_ + p_;
#pragma omp simd
      for (int64_t i = 0; i < k; ++i) {
        const uint64_t t = temper(x[i]) >> 11;
        const auto h = static_cast<uint32_t>(t >> 32), l = static_cast<uint32_t>(t);
        keep[i] = (h > th) | ((h == th) & (l >= tl));
      }
      keep += k;
      n -= k;
      p_ += static_cast<int>(k);
    }
  }
  ONNXTRAIN_ELEMENTWISE_AVX2 void draw_keep_avx2(uint8_t* keep, int64_t n, uint64_t threshold) {
    draw_keep_loops(keep, n, threshold);
  }

  alignas(64) uint64_t x_[kN];
  int p_ = kN;
};

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
    MersenneTwister64(random_stream_seed(seed_, stream.run_index())).draw_keep(keep, count, threshold);
    scale_kept(x, keep, 1.0 / (1.0 - ratio), y, count);
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
  uint64_t seed_;  // the `seed` attribute
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
