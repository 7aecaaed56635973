// "cpu" kernels of the float32 unary ops oneDNN's eltwise kernels do not take (kernels/onednn/eltwise.cc):
// Neg, Reciprocal, Log, Erf, Selu, HardSigmoid, and Clip (its bounds are runtime inputs from opset 11, which
// a oneDNN primitive cannot take: it fixes them at creation; MobileNetV2's 35 ReLU6 took 8.7 ms of an
// 81 ms step at 32x32 on the reference loop). The math is the reference kernels' per element (log, erf
// and expm1 from libmvec, elementwise_vector_math.h, within 4 ulp of libm), over the flat tensor split
// across threads. Other dtypes run the reference kernel (same device).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise_broadcast.h"
#include "kernels/cpu/elementwise_vector_math.h"
#include "kernels/elementwise_functors.h"

namespace onnxtrain {
namespace {

using namespace cpu;
using namespace cpu::elementwise;

// y = fn(x) per element of input 0 into output 0, split over the threads.
template <typename Fn>
void map_elements(std::span<const TensorView> inputs, std::span<const TensorView> outputs, int64_t grain, Fn fn) {
  const float* x = inputs[0].as<const float>();
  float* y = outputs[0].as<float>();
  parallel_for(outputs[0].numel(), grain, [&](int64_t begin, int64_t end) {
    const Fn local = fn;  // a copy per thread: stores to y cannot alias its parameters
    binary_segment(x + begin, true, x + begin, true, y + begin, end - begin,
                   [local](float v, float) { return local(v); });
  });
}

template <typename Fn>
class UnaryKernel final : public Kernel {
 public:
  UnaryKernel(Fn fn, int64_t grain) : fn_(fn), grain_(grain) {}
  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    map_elements(inputs, outputs, grain_, fn_);
  }

 private:
  Fn fn_;
  int64_t grain_;
};

struct Unchanged {
  float operator()(float, float fx) const { return fx; }
};

// A unary op on a vector math function (elementwise_vector_math.h), then `finish(x, f(x))` per element.
template <typename Finish>
class VectorMathKernel final : public Kernel {
 public:
  using Map = void (*)(const float*, float*, int64_t);
  VectorMathKernel(Map map, Finish finish) : map_(map), finish_(finish) {}
  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* x = inputs[0].as<const float>();
    float* y = outputs[0].as<float>();
    parallel_for(outputs[0].numel(), kMathGrain, [&](int64_t begin, int64_t end) {
      map_(x + begin, y + begin, end - begin);
      if constexpr (!std::is_same_v<Finish, Unchanged>) {
        binary_segment(x + begin, true, y + begin, true, y + begin, end - begin, Finish(finish_));
      }
    });
  }

 private:
  Map map_;
  Finish finish_;
};

template <typename Finish = Unchanged>
std::unique_ptr<Kernel> vector_math(const KernelSpec& spec, void (*map)(const float*, float*, int64_t),
                                    Finish finish = {}) {
  std::unique_ptr<Kernel> fallback = elementwise_reference_kernel(spec);
  if (spec.inputs[0].dtype != DType::Float32) return fallback;
  return std::make_unique<VectorMathKernel<Finish>>(map, finish);
}

// The kernel of `fn` for float32, else the reference kernel (which also validates the spec).
template <typename Fn>
std::unique_ptr<Kernel> unary(const KernelSpec& spec, Fn fn, int64_t grain) {
  std::unique_ptr<Kernel> fallback = elementwise_reference_kernel(spec);
  if (spec.inputs[0].dtype != DType::Float32) return fallback;
  return std::make_unique<UnaryKernel<Fn>>(fn, grain);
}

std::unique_ptr<Kernel> make_neg(const KernelSpec& spec) {
  return unary(
      spec, [](float x) { return -x; }, kCheapGrain);
}

std::unique_ptr<Kernel> make_reciprocal(const KernelSpec& spec) {
  return unary(
      spec, [](float x) { return 1.0f / x; }, kCheapGrain);
}

std::unique_ptr<Kernel> make_log(const KernelSpec& spec) { return vector_math(spec, &vector_log); }

std::unique_ptr<Kernel> make_erf(const KernelSpec& spec) { return vector_math(spec, &vector_erf); }

std::unique_ptr<Kernel> make_selu(const KernelSpec& spec) {
  const auto alpha = static_cast<float>(spec.attributes.get_float("alpha", 1.67326319217681884765625));
  const auto gamma = static_cast<float>(spec.attributes.get_float("gamma", 1.05070102214813232421875));
  return vector_math(spec, &vector_expm1, [alpha, gamma](float x, float expm1_x) {
    return gamma * select_float(x > 0.0f, x, alpha * expm1_x);
  });
}

std::unique_ptr<Kernel> make_hard_sigmoid(const KernelSpec& spec) {
  const auto alpha = static_cast<float>(spec.attributes.get_float("alpha", 0.2));
  const auto beta = static_cast<float>(spec.attributes.get_float("beta", 0.5));
  return unary(
      spec,
      [alpha, beta](float x) {
        const float v = alpha * x + beta;
        return v < 0.0f ? 0.0f : (1.0f < v ? 1.0f : v);  // std::clamp(v, 0, 1): NaN stays NaN
      },
      kCheapGrain);
}

// Clip from opset 11: min and max from the optional scalar inputs 1 and 2, read at every run (absent is
// unbounded). NaN stays NaN (elementwise::Clip, the reference's functor).
class ClipWithBoundInputsKernel final : public Kernel {
 public:
  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
    if (inputs.size() > 1 && inputs[1].present()) lo = inputs[1].as<const float>()[0];
    if (inputs.size() > 2 && inputs[2].present()) hi = inputs[2].as<const float>()[0];
    map_elements(inputs, outputs, kCheapGrain, ::onnxtrain::elementwise::Clip<float>{lo, hi});
  }
};

// Clip: before opset 11 min and max are attributes, fixed with the kernel.
std::unique_ptr<Kernel> make_clip(const KernelSpec& spec) {
  if (spec.opset >= 11) {
    std::unique_ptr<Kernel> fallback = elementwise_reference_kernel(spec);  // validates the bounds' shapes
    if (spec.inputs[0].dtype != DType::Float32) return fallback;
    return std::make_unique<ClipWithBoundInputsKernel>();
  }
  const float lowest = std::numeric_limits<float>::lowest(), highest = std::numeric_limits<float>::max();
  const auto bound = [&](const char* name, float unbounded) {
    const double v = spec.attributes.get_float(name, unbounded);
    return static_cast<float>(std::clamp<double>(v, lowest, highest));
  };
  return unary(spec, ::onnxtrain::elementwise::Clip<float>{bound("min", lowest), bound("max", highest)}, kCheapGrain);
}

}  // namespace

void register_cpu_elementwise_unary_kernels(KernelRegistry& registry) {
  const std::vector<DType> f32 = {DType::Float32};
  registry.add(cpu::cpu_entry("Neg", f32, &make_neg));
  registry.add(cpu::cpu_entry("Reciprocal", f32, &make_reciprocal));
  registry.add(cpu::cpu_entry("Log", f32, &make_log));
  registry.add(cpu::cpu_entry("Erf", f32, &make_erf));
  registry.add(cpu::cpu_entry("Selu", f32, &make_selu));
  registry.add(cpu::cpu_entry("HardSigmoid", f32, &make_hard_sigmoid));
  registry.add(cpu::cpu_entry("Clip", f32, &make_clip));
}

}  // namespace onnxtrain
