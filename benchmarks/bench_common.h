// What the kernel benchmarks share: random inputs, a kernel of one implementation prepared once and bound
// to its buffers (so a call times run() only), wall-clock seconds per call, the best of alternating rounds
// of two calls (so load from other processes skews neither side), bytes moved and a rate counter, main().
//
//   const std::function<void()> ours = bench::kernel_call(spec, {bench::random_tensor(F32, {64, 128})}, "");
//   const bench::BestSeconds best = bench::alternating_best(ours, bench::kernel_call(spec, inputs, "reference"));
//   state.counters["GB/s"] = bench::rate_counter(bench::bytes_moved(inputs, spec.outputs));
//   int main(int argc, char** argv) { return bench::run_benchmarks(argc, argv, &register_all); }
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/kernel.h"

namespace onnxtrain::bench {

// A tensor of `sizes`: float32 uniform in [lo, hi), other dtypes random bytes in [0, 0x3f] (small
// non-negative integers, valid bools only where the caller fixes them). One generator, seeded 42, per binary.
inline Tensor random_tensor(DType dtype, const std::vector<int64_t>& sizes, float lo = -1.0f, float hi = 1.0f) {
  static std::mt19937 rng(42);
  Tensor t(dtype, sizes);
  if (dtype == DType::Float32) {
    std::uniform_real_distribution<float> dist(lo, hi);
    for (float& v : t.data<float>()) v = dist(rng);
  } else if (t.nbytes() > 0) {
    for (size_t i = 0; i < t.nbytes(); ++i) t.raw()[i] = static_cast<std::byte>(rng() & 0x3f);
  }
  return t;
}

// The kernel of `implementation` ("" = the default) prepared for `spec` (its inputs are set from `inputs`,
// where a default Tensor is an omitted input), over `inputs` and fresh outputs of spec.outputs, as a call.
// The registry is searched for `dtype`, by default kernel_dtype(spec).
inline std::function<void()> kernel_call(KernelSpec spec, std::vector<Tensor> inputs, const std::string& implementation,
                                         DType dtype = DType::Undefined) {
  spec.inputs.clear();
  for (const Tensor& t : inputs)
    spec.inputs.push_back(t.dtype() == DType::Undefined ? TensorDesc{} : TensorDesc{t.dtype(), t.sizes()});
  if (dtype == DType::Undefined) dtype = kernel_dtype(spec);
  const KernelEntry* entry =
      KernelRegistry::builtin().find(spec.domain, spec.op_type, DeviceKind::Cpu, dtype, implementation);
  if (!entry) throw std::runtime_error("no " + implementation + " kernel for " + spec.op_type);
  std::shared_ptr<Kernel> kernel = entry->prepare(spec);
  const size_t input_count = inputs.size();
  auto tensors = std::make_shared<std::vector<Tensor>>(std::move(inputs));
  for (const TensorDesc& d : spec.outputs) tensors->emplace_back(d.dtype, d.sizes);
  auto in = std::make_shared<std::vector<TensorView>>(), out = std::make_shared<std::vector<TensorView>>();
  for (size_t i = 0; i < tensors->size(); ++i) {
    const Tensor& t = (*tensors)[i];
    (i < input_count ? *in : *out).push_back(t.dtype() == DType::Undefined ? TensorView{} : TensorView::of(t));
  }
  auto stream = std::make_shared<Stream>();
  return [kernel, tensors, in, out, stream] { kernel->run(*stream, *in, *out); };
}

// Wall-clock seconds per call of fn over at least `seconds` and `min_calls` calls, after one warm-up call.
inline double seconds_per_call(const std::function<void()>& fn, double seconds, int64_t min_calls = 1) {
  fn();
  int64_t calls = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < seconds || calls < min_calls) {
    fn();
    ++calls;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return elapsed / static_cast<double>(calls);
}

// Each call's best seconds per call over four alternating rounds of 0.02 s.
struct BestSeconds {
  double ours, reference;
};
inline BestSeconds alternating_best(const std::function<void()>& ours, const std::function<void()>& reference) {
  BestSeconds best{seconds_per_call(ours, 0.02), seconds_per_call(reference, 0.02)};
  for (int round = 0; round < 3; ++round) {
    best.reference = std::min(best.reference, seconds_per_call(reference, 0.02));
    best.ours = std::min(best.ours, seconds_per_call(ours, 0.02));
  }
  return best;
}

// Bytes a call reads and writes: every input and output once.
inline double bytes_moved(const std::vector<Tensor>& inputs, const std::vector<TensorDesc>& outputs) {
  double bytes = 0;
  for (const Tensor& t : inputs) bytes += static_cast<double>(t.nbytes());
  for (const TensorDesc& d : outputs) bytes += static_cast<double>(d.numel() * dtype_size(d.dtype));
  return bytes;
}

// A counter of `amount` (bytes, FLOPs) per iteration shown in giga-units per second.
inline benchmark::Counter rate_counter(double amount) {
  return benchmark::Counter(amount * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// main() of a benchmark binary whose benchmarks `register_all` registers.
inline int run_benchmarks(int argc, char** argv, void (*register_all)()) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace onnxtrain::bench
