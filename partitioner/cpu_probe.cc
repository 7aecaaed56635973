#include "partitioner/cpu_probe.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>
#include <vector>

#include "graph/error.h"
#include "graph/host_resources.h"
#include "graph/recurrent_cell.h"
#include "kernels/backend_info.h"
#include "kernels/kernel.h"

namespace onnxtrain {

namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<Kernel> prepare(const std::string& op, int opset, std::vector<TensorDesc> inputs,
                                std::vector<TensorDesc> outputs, Attributes attributes = {}) {
  KernelSpec spec{.op_type = op,
                  .opset = opset,
                  .attributes = std::move(attributes),
                  .inputs = std::move(inputs),
                  .outputs = std::move(outputs),
                  .node_name = "cpu probe " + op};
  const KernelEntry* entry = KernelRegistry::builtin().find("", op, DeviceKind::Cpu, DType::Float32);
  ONNXTRAIN_CHECK(entry, "no float32 CPU kernel for " + op);
  return entry->prepare(spec);
}

// Runs `kernel` once untimed (page faults, primitive caches), then until `budget_s` has passed or
// `max_runs` ran (at least `min_runs`); returns every run's seconds.
std::vector<double> time_runs(Kernel& kernel, std::vector<Tensor>& in, std::vector<Tensor>& out, double budget_s,
                              int min_runs, int max_runs) {
  std::vector<TensorView> iv, ov;
  for (Tensor& t : in) iv.push_back(TensorView::of(t));
  for (Tensor& t : out) ov.push_back(TensorView::of(t));
  Stream stream(DeviceKind::Cpu);
  kernel.run(stream, iv, ov);
  std::vector<double> runs;
  const auto start = Clock::now();
  while (static_cast<int>(runs.size()) < max_runs &&
         (static_cast<int>(runs.size()) < min_runs ||
          std::chrono::duration<double>(Clock::now() - start).count() < budget_s)) {
    const auto t = Clock::now();
    kernel.run(stream, iv, ov);
    runs.push_back(std::chrono::duration<double>(Clock::now() - t).count());
  }
  return runs;
}

Tensor random_tensor(std::vector<int64_t> sizes, std::mt19937& rng) {
  Tensor t(DType::Float32, std::move(sizes));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : t.data<float>()) v = u(rng);
  return t;
}

}  // namespace

double measure_memory_bandwidth(int threads) {
  // 64 MiB read and 64 MiB written per run, twice the last-level cache of large server CPUs' core
  // complexes, so the rate is DRAM's (the memory figure GPU datasheets give too).
  constexpr int64_t n = 16 << 20;
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(threads);
  auto relu = prepare("Relu", 14, {{DType::Float32, {n}}}, {{DType::Float32, {n}}});
  // Zeros: Relu's speed does not depend on the values, and drawing 16M random numbers would take longer
  // than the measurement.
  std::vector<Tensor> in = {Tensor(DType::Float32, {n})}, out = {Tensor(DType::Float32, {n})};
  const std::vector<double> runs = time_runs(*relu, in, out, 0.03, 3, 20);
  omp_set_num_threads(saved_threads);
  return 2.0 * n * sizeof(float) / *std::min_element(runs.begin(), runs.end());
}

CpuProbe probe_local_cpu() {
  const auto start = Clock::now();
  CpuProbe probe;
  probe.threads = omp_get_max_threads();
  probe.cpu_isa = query_backend_info().cpu_isa;
  std::mt19937 rng(7);

  {  // GEMM: 2·M·N·K FLOPs, large enough to run at the kernel's full rate, small enough to stay quick.
    constexpr int64_t n = 512;
    auto matmul =
        prepare("MatMul", 13, {{DType::Float32, {n, n}}, {DType::Float32, {n, n}}}, {{DType::Float32, {n, n}}});
    std::vector<Tensor> in = {random_tensor({n, n}, rng), random_tensor({n, n}, rng)},
                        out = {Tensor(DType::Float32, {n, n})};
    const std::vector<double> runs = time_runs(*matmul, in, out, 0.05, 3, 50);
    probe.gemm_flops = 2.0 * n * n * n / *std::min_element(runs.begin(), runs.end());
  }
  probe.memory_bandwidth = measure_memory_bandwidth(probe.threads);
  {  // Overhead: a kernel with next to no work.
    auto relu = prepare("Relu", 14, {{DType::Float32, {16}}}, {{DType::Float32, {16}}});
    std::vector<Tensor> in = {random_tensor({16}, rng)}, out = {Tensor(DType::Float32, {16})};
    const std::vector<double> runs = time_runs(*relu, in, out, 0.005, 5, 2000);
    probe.kernel_overhead_s = *std::min_element(runs.begin(), runs.end());
    probe.busy = probe.kernel_overhead_s > 100e-6;
  }
  {  // A recurrent step: an LSTM of 16 units over 16 steps of a batch of 16, writing the reserve as training
     // does (Y, no Y_h or Y_c, the reserve; graph/recurrent_cell.h).
    constexpr int64_t steps = 16, batch = 16, hidden = 16;
    const std::vector<int64_t> x{steps, batch, hidden}, w{1, 4 * hidden, hidden}, y{steps, 1, batch, hidden};
    const RecurrentCell lstm_cell{.kind = RecurrentCellKind::Lstm};
    const std::vector<int64_t> reserve{steps * batch * lstm_cell.reserve_width(hidden)};
    auto lstm = prepare("LSTM", 14, {{DType::Float32, x}, {DType::Float32, w}, {DType::Float32, w}},
                        {{DType::Float32, y}, {}, {}, {DType::Float32, reserve}}, {{"hidden_size", hidden}});
    std::vector<Tensor> in = {random_tensor(x, rng), random_tensor(w, rng), random_tensor(w, rng)},
                        out = {Tensor(DType::Float32, y), Tensor(), Tensor(), Tensor(DType::Float32, reserve)};
    const std::vector<double> runs = time_runs(*lstm, in, out, 0.01, 5, 200);
    probe.step_overhead_s = *std::min_element(runs.begin(), runs.end()) / steps;
  }
  probe.probe_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return probe;
}

DeviceDescription describe_local_cpu(const CpuProbe& probe) {
  DeviceDescription d;
  d.name = "local CPU (" + probe.cpu_isa + ", " + std::to_string(probe.threads) + " threads)";
  d.source = std::string("measured (MatMul 512^3, Relu 64 MiB)") + (probe.busy ? ", on a busy machine" : "");
  d.fp32_flops = probe.gemm_flops;
  d.fp64_flops = probe.gemm_flops / 2;  // half the SIMD lanes
  d.memory_bytes = physical_memory_bytes();
  d.memory_bandwidth = probe.memory_bandwidth;
  d.compute_efficiency = 0.7;
  d.memory_efficiency = 1.0;
  d.kernel_overhead_s = std::min(probe.kernel_overhead_s, 20e-6);
  d.step_overhead_s = std::min(probe.step_overhead_s, 60e-6);
  d.link = {"shared memory", probe.memory_bandwidth / 2, 1e-6};
  return d;
}

DeviceDescription measure_local_cpu() { return describe_local_cpu(probe_local_cpu()); }

}  // namespace onnxtrain
