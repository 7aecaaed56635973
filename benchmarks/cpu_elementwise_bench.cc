// The "cpu" elementwise kernels (kernels/cpu/elementwise_*.cc) against the reference kernels on
// transformer (64,16,128) activations and ResNet (32,16,32,32) maps: broadcasting arithmetic, variadic
// ops, comparisons, Where, the unary ops oneDNN lacks, Dropout, DropoutGrad and the ActivationGrads
// oneDNN hands to the cpu kernel. Counters: GB/s (bytes of
// every input and output per call) and speedup_vs_reference (reference time / ours, each the best of a
// few alternating rounds, so load from other processes skews neither side). Threads: OMP_NUM_THREADS.
//
//   OMP_NUM_THREADS=1 cpu_elementwise_bench --benchmark_min_time=0.05
#include <benchmark/benchmark.h>
#include <omp.h>

#include <functional>
#include <random>

#include "benchmarks/bench_common.h"
#include "kernels/kernel.h"

using namespace onnxtrain;
using Ints = std::vector<int64_t>;

namespace {

struct Arg {
  DType dtype;
  Ints sizes;
  float value = NAN;      // a fixed value for every element (a scalar exponent, a ratio); random when NaN
  bool positive = false;  // random in [0.1, 2) (Log, Pow), else in [-2, 2)
};

Tensor make_tensor(const Arg& a) {
  static std::mt19937 rng(42);
  Tensor t(a.dtype, a.sizes);
  if (a.dtype == DType::Bool) {
    auto* p = reinterpret_cast<uint8_t*>(t.raw());
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::isnan(a.value) ? rng() % 2 : a.value != 0;
  } else {
    std::uniform_real_distribution<float> dist(a.positive ? 0.1f : -2.0f, 2.0f);
    auto* p = reinterpret_cast<float*>(t.raw());
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::isnan(a.value) ? dist(rng) : a.value;
  }
  return t;
}

struct BenchCase {
  std::string name;
  std::string op;
  std::vector<Arg> inputs;
  std::vector<Arg> outputs;
  Attributes attributes;
  std::string domain;
  int opset = 17;

  double bytes() const {
    double b = 0;
    for (const auto* list : {&inputs, &outputs})
      for (const Arg& a : *list) {
        int64_t n = 1;
        for (int64_t s : a.sizes) n *= s;
        b += static_cast<double>(n * static_cast<int64_t>(dtype_size(a.dtype)));
      }
    return b;
  }
};

// The kernel of `implementation` for the case, prepared once over tensors it owns; a call runs it.
std::function<void()> kernel_call(const BenchCase& c, const std::string& implementation) {
  KernelSpec spec{.op_type = c.op, .domain = c.domain, .opset = c.opset, .attributes = c.attributes};
  std::vector<Tensor> inputs;
  for (const Arg& a : c.inputs) inputs.push_back(make_tensor(a));
  for (const Arg& a : c.outputs) spec.outputs.push_back({a.dtype, a.sizes});
  return bench::kernel_call(spec, std::move(inputs), implementation, c.inputs[0].dtype);
}

void measure(benchmark::State& state, const BenchCase& c) {
  const std::function<void()> ours = kernel_call(c, "cpu");
  const std::function<void()> reference = kernel_call(c, "reference");
  ours();
  for (auto _ : state) ours();
  state.counters["GB/s"] = bench::rate_counter(c.bytes());
  const bench::BestSeconds best = bench::alternating_best(ours, reference);
  state.counters["reference_GB/s"] = c.bytes() * 1e-9 / best.reference;
  state.counters["speedup_vs_reference"] = best.reference / best.ours;
  state.counters["threads"] = omp_get_max_threads();
}

std::vector<BenchCase> cases() {
  const DType f = DType::Float32, b = DType::Bool;
  const Ints t = {64, 16, 128}, r = {32, 16, 32, 32};
  return {
      {"Add/transformer_same", "Add", {{f, t}, {f, t}}, {{f, t}}},
      {"Add/resnet_bias_16x1x1", "Add", {{f, r}, {f, {16, 1, 1}}}, {{f, r}}},
      {"Mul/transformer_scalar", "Mul", {{f, t}, {f, {}}}, {{f, t}}},
      {"Sub/transformer_row_128", "Sub", {{f, t}, {f, {128}}}, {{f, t}}},
      {"Div/transformer_col_64x16x1", "Div", {{f, t}, {f, {64, 16, 1}}}, {{f, t}}},
      {"Pow/transformer_square", "Pow", {{f, t}, {f, {}, 2.0f}}, {{f, t}}},
      {"Pow/transformer_1.5", "Pow", {{f, t, NAN, true}, {f, {}, 1.5f}}, {{f, t}}},
      {"Max/resnet_same", "Max", {{f, r}, {f, r}}, {{f, r}}},
      {"Sum/transformer_3_inputs", "Sum", {{f, t}, {f, t}, {f, t}}, {{f, t}}},
      {"Mean/transformer_2_inputs", "Mean", {{f, t}, {f, t}}, {{f, t}}},
      {"PRelu/resnet_slope_16x1x1", "PRelu", {{f, r}, {f, {16, 1, 1}}}, {{f, r}}},
      {"Less/transformer_same", "Less", {{f, t}, {f, t}}, {{b, t}}},
      {"Equal/transformer_scalar", "Equal", {{f, t}, {f, {}, 1.0f}}, {{b, t}}},
      {"Where/transformer_mask_scalar", "Where", {{b, t}, {f, t}, {f, {}, -1e9f}}, {{f, t}}},
      {"And/transformer_same", "And", {{b, t}, {b, t}}, {{b, t}}},
      {"Neg/transformer", "Neg", {{f, t}}, {{f, t}}},
      {"Reciprocal/transformer", "Reciprocal", {{f, t}}, {{f, t}}},
      {"Log/transformer", "Log", {{f, t, NAN, true}}, {{f, t}}},
      {"Erf/transformer", "Erf", {{f, t}}, {{f, t}}},
      {"Selu/resnet", "Selu", {{f, r}}, {{f, r}}},
      {"HardSigmoid/resnet", "HardSigmoid", {{f, r}}, {{f, r}}},
      {"Neg/resnet", "Neg", {{f, r}}, {{f, r}}},
      {"ActivationGrad/Selu_transformer",
       "ActivationGrad",
       {{f, t}, {f, t}},
       {{f, t}},
       {{"activation", std::string("Selu")}},
       "ai.onnxtrain",
       1},
      {"ActivationGrad/Erf_transformer",
       "ActivationGrad",
       {{f, t}, {f, t}},
       {{f, t}},
       {{"activation", std::string("Erf")}},
       "ai.onnxtrain",
       1},
      {"ActivationGrad/HardSigmoid_resnet",
       "ActivationGrad",
       {{f, r}, {f, r}},
       {{f, r}},
       {{"activation", std::string("HardSigmoid")}},
       "ai.onnxtrain",
       1},
      {"Dropout/transformer_train_0.1", "Dropout", {{f, t}, {f, {}, 0.1f}, {b, {}, 1.0f}}, {{f, t}, {b, t}}},
      {"DropoutGrad/transformer", "DropoutGrad", {{f, t}, {b, t}, {f, {}, 0.1f}}, {{f, t}}, {}, "ai.onnxtrain", 1},
  };
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  for (const BenchCase& c : cases()) {
    benchmark::RegisterBenchmark(c.name.c_str(), [c](benchmark::State& state) {
      measure(state, c);
    })->Unit(benchmark::kMicrosecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
