// "cpu" kernels of the broadcasting arithmetic Add, Sub, Mul, Div, Pow, the variadic Max, Min, Sum, Mean
// and PRelu, float32, on the BroadcastPlan engine. The per-element math is the reference kernels' (Min/Max
// propagate NaN, Mean divides the sum by the count); Pow is libmvec's vector powf (within 4 ulp of
// std::pow), x² and x¹ exactly for a scalar exponent. Other dtypes, Pow with a non-float32 exponent and
// shapes the plan does not take run the reference kernel (same device), which also does every
// prepare-time check.
#include <cmath>
#include <limits>

#include "graph/fused_activation.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise_broadcast.h"
#include "kernels/cpu/elementwise_vector_math.h"
#include "kernels/elementwise_functors.h"

namespace onnxtrain {
namespace {

using namespace cpu;
using namespace cpu::elementwise;

struct AddOp {
  float operator()(float a, float b) const { return a + b; }
};
struct AddReluOp {  // Add with a fused Relu (graph/autodiff/add_relu.h), as Relu computes it
  float operator()(float a, float b) const { return ::onnxtrain::elementwise::Relu<float>{}(a + b); }
};
struct SubOp {
  float operator()(float a, float b) const { return a - b; }
};
struct MulOp {
  float operator()(float a, float b) const { return a * b; }
};
struct DivOp {
  float operator()(float a, float b) const { return a / b; }
};
struct MaxOp {  // NaN if either is NaN
  float operator()(float a, float b) const {
    return select_float(std::isunordered(a, b), std::numeric_limits<float>::quiet_NaN(), b > a ? b : a);
  }
};
struct MinOp {
  float operator()(float a, float b) const {
    return select_float(std::isunordered(a, b), std::numeric_limits<float>::quiet_NaN(), b < a ? b : a);
  }
};
struct PReluOp {  // a: X, b: slope
  float operator()(float x, float slope) const { return select_float(x < 0.0f, slope * x, x); }
};
struct FirstOp {
  float operator()(float a, float) const { return a; }
};

bool float32_only(const KernelSpec& spec) {
  for (const auto* list : {&spec.inputs, &spec.outputs})
    for (const TensorDesc& d : *list)
      if (d.dtype != DType::Float32) return false;
  return true;
}

template <typename Op>
std::unique_ptr<Kernel> make_arithmetic(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = elementwise_reference_kernel(spec);  // validates dtypes and sizes
  if (!float32_only(spec)) return fallback;
  return make_binary_kernel<float, float, float>(spec, Op{}, kCheapGrain, std::move(fallback));
}

// Pow: a scalar exponent of 2 or 1 is exact without std::pow; anything else calls it per element.
class PowKernel final : public Kernel {
 public:
  PowKernel(BroadcastPlan plan, bool scalar_exponent) : plan_(plan), scalar_exponent_(scalar_exponent) {}
  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* a = inputs[0].as<const float>();
    const float* b = inputs[1].as<const float>();
    float* y = outputs[0].as<float>();
    const bool ca = plan_.contiguous(0), cb = plan_.contiguous(1);
    auto each = [&](auto op, int64_t grain) {
      plan_.for_each_segment(grain, [&](const int64_t* offsets, int64_t out, int64_t n) {
        binary_segment(a + offsets[0], ca, b + offsets[1], cb, y + out, n, op);
      });
    };
    const float e = scalar_exponent_ ? b[0] : 0.0f;
    if (scalar_exponent_ && e == 2.0f) {
      each([](float x, float) { return x * x; }, kCheapGrain);
    } else if (scalar_exponent_ && e == 1.0f) {
      each([](float x, float) { return x; }, kCheapGrain);
    } else {
      plan_.for_each_segment(kMathGrain, [&](const int64_t* offsets, int64_t out, int64_t n) {
        vector_pow(a + offsets[0], ca, b + offsets[1], cb, y + out, n);
      });
    }
  }

 private:
  BroadcastPlan plan_;
  bool scalar_exponent_;
};

std::unique_ptr<Kernel> make_pow(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = elementwise_reference_kernel(spec);
  if (!float32_only(spec)) return fallback;
  BroadcastPlan plan(spec.outputs[0].sizes, {spec.inputs[0].sizes, spec.inputs[1].sizes});
  if (!plan.supported()) return fallback;
  return std::make_unique<PowKernel>(plan, spec.inputs[1].numel() == 1);
}

// Max/Min/Sum/Mean of k inputs: y = op(in0, in1), then y = op(y, in_j) for each further input, each pass
// one broadcast plan; Mean divides in its last pass.
template <typename Combine, bool kMean>
class VariadicKernel final : public Kernel {
 public:
  explicit VariadicKernel(std::vector<BroadcastPlan> plans, size_t count) : plans_(std::move(plans)), count_(count) {}
  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    float* y = outputs[0].as<float>();
    for (size_t j = 0; j < plans_.size(); ++j) {
      const BroadcastPlan& plan = plans_[j];
      const float* a = j == 0 ? inputs[0].as<const float>() : y;
      const float* b = inputs[count_ == 1 ? 0 : j + 1].as<const float>();
      const bool ca = plan.contiguous(0), cb = plan.contiguous(1);
      auto pass = [&](auto op) {
        plan.for_each_segment(kCheapGrain, [&](const int64_t* offsets, int64_t out, int64_t n) {
          binary_segment(a + offsets[0], ca, b + offsets[1], cb, y + out, n, op);
        });
      };
      if (count_ == 1) {
        pass(FirstOp{});  // Mean of one: v / 1 = v
      } else if (kMean && j + 1 == plans_.size()) {
        const float count = static_cast<float>(count_);
        pass([count](float s, float v) { return (s + v) / count; });
      } else {
        pass(Combine{});
      }
    }
  }

 private:
  std::vector<BroadcastPlan> plans_;
  size_t count_;
};

template <typename Combine, bool kMean>
std::unique_ptr<Kernel> make_variadic(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = elementwise_reference_kernel(spec);
  if (!float32_only(spec)) return fallback;
  const std::vector<int64_t>& out = spec.outputs[0].sizes;
  std::vector<BroadcastPlan> plans;
  if (spec.inputs.size() == 1) {
    plans.emplace_back(out, std::vector<std::vector<int64_t>>{spec.inputs[0].sizes, spec.inputs[0].sizes});
  } else {
    plans.emplace_back(out, std::vector<std::vector<int64_t>>{spec.inputs[0].sizes, spec.inputs[1].sizes});
    for (size_t k = 2; k < spec.inputs.size(); ++k)
      plans.emplace_back(out, std::vector<std::vector<int64_t>>{out, spec.inputs[k].sizes});
  }
  for (const BroadcastPlan& plan : plans)
    if (!plan.supported()) return fallback;
  return std::make_unique<VariadicKernel<Combine, kMean>>(std::move(plans), spec.inputs.size());
}

std::unique_ptr<Kernel> make_add(const KernelSpec& spec) {
  return fuses_relu(spec.attributes) ? make_arithmetic<AddReluOp>(spec) : make_arithmetic<AddOp>(spec);
}

std::unique_ptr<Kernel> make_prelu(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = elementwise_reference_kernel(spec);
  if (!float32_only(spec)) return fallback;
  return make_binary_kernel<float, float, float>(spec, PReluOp{}, kCheapGrain, std::move(fallback));
}

}  // namespace

void register_cpu_elementwise_binary_kernels(KernelRegistry& registry) {
  const std::vector<DType> f32 = {DType::Float32};
  registry.add(cpu::cpu_entry("Add", f32, &make_add));
  registry.add(cpu::cpu_entry("Sub", f32, &make_arithmetic<SubOp>));
  registry.add(cpu::cpu_entry("Mul", f32, &make_arithmetic<MulOp>));
  registry.add(cpu::cpu_entry("Div", f32, &make_arithmetic<DivOp>));
  registry.add(cpu::cpu_entry("Pow", f32, &make_pow));
  registry.add(cpu::cpu_entry("Max", f32, &make_variadic<MaxOp, false>));
  registry.add(cpu::cpu_entry("Min", f32, &make_variadic<MinOp, false>));
  registry.add(cpu::cpu_entry("Sum", f32, &make_variadic<AddOp, false>));
  registry.add(cpu::cpu_entry("Mean", f32, &make_variadic<AddOp, true>));
  registry.add(cpu::cpu_entry("PRelu", f32, &make_prelu));
}

}  // namespace onnxtrain
