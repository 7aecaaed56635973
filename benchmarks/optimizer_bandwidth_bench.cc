// The optimizer step and the data-parallel gradient exchange against a STREAM-like copy on this machine:
// both are memory-bound, so the figure that says whether they are done well is the bandwidth they reach
// against what a plain copy reaches with the same threads. Over ResNet-18's parameters (10 classes,
// 11 181 642 floats in 62 tensors, 45 MB):
//   - Optimizer::step, momentum SGD (5 passes: reads w, g, buf; writes w, buf), the same writing a mirror
//     of w (6, as a pipeline stage's update) and Adam (7), on 1 and 2 OpenMP threads;
//   - dp's exchange on 2 replica threads: the sum of both replicas' gradients into both copies
//     (ReplicaGradientSum::sum_share) followed by each replica's whole momentum step on its own copy,
//     against the sharded step (step_share: the sums and the update of replica 0's weights in one pass,
//     then the copy to replica 1; executor/sharded_optimizer_step.h);
//   - the sharded step of 3 and 4 replicas over one shared copy of the weights, their shares run on the
//     same 2 threads (dp:4 on a bigger machine reads 4 gradients a step; here the bandwidth per pass).
// Counters: GB/s (the bytes the passes read and write, per second), copy_GB/s (std::copy of two 45 MB
// arrays split over the same threads: bytes read + written), of_copy (the ratio) and ms per call; each
// the best of alternating rounds against the copy, so load from other processes skews neither side.
//
//   build/release/benchmarks/optimizer_bandwidth_bench --benchmark_min_time=0.05
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "benchmarks/bench_common.h"
#include "executor/optimizer.h"
#include "executor/replica_gradient_sum.h"
#include "executor/sharded_optimizer_step.h"
#include "executor/worker_threads.h"

using namespace onnxtrain;

namespace {

// torchvision's resnet18(num_classes=10): every parameter's element count, in the model's order.
std::vector<size_t> resnet18_parameter_sizes() {
  std::vector<size_t> sizes{64 * 3 * 7 * 7, 64, 64};  // conv1, bn1
  auto conv_bn = [&](size_t out, size_t in, size_t k) { sizes.insert(sizes.end(), {out * in * k * k, out, out}); };
  size_t in = 64;
  for (size_t out : {64, 128, 256, 512}) {
    for (int block = 0; block < 2; ++block) {
      const size_t from = block == 0 ? in : out;
      conv_bn(out, from, 3);
      conv_bn(out, out, 3);
      if (block == 0 && from != out) conv_bn(out, from, 1);  // the downsample
    }
    in = out;
  }
  sizes.insert(sizes.end(), {10 * 512, 10});  // fc
  return sizes;
}

using Tensors = std::vector<std::vector<float>>;

Tensors random_tensors(const std::vector<size_t>& sizes, float scale) {
  static std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-scale, scale);
  Tensors t;
  for (size_t n : sizes) {
    t.emplace_back(n);
    for (float& v : t.back()) v = dist(rng);
  }
  return t;
}

size_t total(const std::vector<size_t>& sizes) {
  size_t n = 0;
  for (size_t s : sizes) n += s;
  return n;
}

std::vector<ParamSlot> slots_of(Tensors& w, Tensors& g) {
  std::vector<ParamSlot> slots;
  for (size_t t = 0; t < w.size(); ++t) slots.push_back({"p" + std::to_string(t), w[t], g[t]});
  return slots;
}

std::vector<std::span<float>> spans_of(Tensors& tensors) {
  std::vector<std::span<float>> spans;
  for (std::vector<float>& t : tensors) spans.emplace_back(t);
  return spans;
}

// The STREAM copy kernel over `floats` elements on `threads` OpenMP threads.
std::function<void()> copy_call(size_t floats, int threads) {
  auto from = std::make_shared<std::vector<float>>(floats, 1.0f), to = std::make_shared<std::vector<float>>(floats);
  return [from, to, threads, floats] {
    const float* a = from->data();
    float* b = to->data();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t chunk = 0; chunk < threads; ++chunk) {
      const size_t begin = floats * static_cast<size_t>(chunk) / threads;
      const size_t end = floats * static_cast<size_t>(chunk + 1) / threads;
      std::copy(a + begin, a + end, b + begin);
    }
  };
}

// Times `ours` against the copy of as many parameters on `threads` threads and sets the counters.
void report(benchmark::State& state, const std::function<void()>& ours, double bytes, int threads) {
  const size_t floats = total(resnet18_parameter_sizes());
  const std::function<void()> copy = copy_call(floats, threads);
  bench::BestSeconds best{};
  for (auto _ : state) best = bench::alternating_best(ours, copy);
  const double copy_bytes = 2.0 * static_cast<double>(floats) * sizeof(float);
  const double gbps = bytes / best.ours * 1e-9, copy_gbps = copy_bytes / best.reference * 1e-9;
  state.counters["GB/s"] = gbps;
  state.counters["copy_GB/s"] = copy_gbps;
  state.counters["of_copy"] = gbps / copy_gbps;
  state.counters["ms"] = best.ours * 1e3;
}

// mirrored: the update also writes a second copy of the weights in its pass (ParamSlot::mirror), as a
// pipeline stage's update writes the working weights its graphs read (executor/pipeline/weight_policy.h).
void optimizer_step(benchmark::State& state, OptimizerConfig config, double passes, bool mirrored) {
  const int threads = static_cast<int>(state.range(0));
  const std::vector<size_t> sizes = resnet18_parameter_sizes();
  auto w = std::make_shared<Tensors>(random_tensors(sizes, 0.1f));
  auto g = std::make_shared<Tensors>(random_tensors(sizes, 0.01f));
  auto mirrors = std::make_shared<Tensors>(random_tensors(sizes, 0.1f));
  auto optimizer = std::make_shared<Optimizer>(config, LrSchedule{.base_lr = 1e-4});
  auto slots = std::make_shared<std::vector<ParamSlot>>(slots_of(*w, *g));
  if (mirrored)
    for (size_t t = 0; t < slots->size(); ++t) (*slots)[t].mirror = (*mirrors)[t];
  omp_set_num_threads(threads);
  report(
      state, [=] { optimizer->step(*slots); }, passes * static_cast<double>(total(sizes)) * sizeof(float), threads);
}

// R replicas on two threads (the caller and one worker), as DataParallelTrainer runs two; with more, each
// thread runs every other replica's share in turn (the same passes over memory as R threads would make).
struct Replicas {
  std::vector<size_t> sizes = resnet18_parameter_sizes();
  int count;
  std::vector<Tensors> weights, gradients;
  std::vector<Optimizer> optimizers;
  ReplicaGradientSum sum;
  WorkerThreads worker{1};

  // shared_weights: every replica publishes replica 0's weights, as DataParallelTrainer's replica threads
  // do. Equal rows: row weights 1/R (exact floats for 2 and 4 replicas; 1/3 is not one).
  explicit Replicas(int replicas, bool shared_weights = false) : count(replicas), sum(replicas) {
    const Tensors w = random_tensors(sizes, 0.1f);
    for (int k = 0; k < count; ++k) {
      weights.push_back(w);
      gradients.push_back(random_tensors(sizes, 0.01f));
      optimizers.emplace_back(OptimizerConfig{.momentum = 0.9}, LrSchedule{.base_lr = 1e-4});
    }
    for (int k = 0; k < count; ++k)
      sum.publish(k, spans_of(gradients[k]), 1.0 / count, spans_of(weights[shared_weights ? 0 : k]));
  }
  // task(k) for every replica k, split over the two threads.
  void on_both(const std::function<void(int)>& task) {
    const auto every_other = [&](int first) {
      for (int k = first; k < count; k += 2) task(k);
    };
    const std::function<void(int)> second = [&](int) { every_other(1); };
    worker.start(second);
    every_other(0);
    worker.wait();
  }
};

void sum_then_step(benchmark::State& state) {
  auto r = std::make_shared<Replicas>(2);
  omp_set_num_threads(1);
  const auto run = [r] {
    r->on_both([&](int k) { r->sum.sum_share(k); });
    r->on_both([&](int k) {
      omp_set_num_threads(1);
      std::vector<ParamSlot> slots = slots_of(r->weights[k], r->gradients[k]);
      r->optimizers[k].step(slots);
    });
  };
  // The sum reads both gradients and writes both (4 passes), then each replica steps its copy (2 × 5).
  report(state, run, 14.0 * static_cast<double>(total(r->sizes)) * sizeof(float), 2);
}

void sharded_step(benchmark::State& state, int replicas, bool shared_weights) {
  auto r = std::make_shared<Replicas>(replicas, shared_weights);
  std::vector<std::pair<std::string, size_t>> params;
  for (size_t t = 0; t < r->sizes.size(); ++t) params.emplace_back("p" + std::to_string(t), r->sizes[t]);
  const auto run = [r, params] {
    ShardedOptimizerStep step;
    step.prepare(r->optimizers[0], params);
    r->on_both([&](int k) { r->sum.step_share(k, step); });
    step.finish(r->optimizers[0]);
  };
  // Reads every gradient, the weights and the momentum; writes the weights (every replica's copy unless
  // shared) and the momentum.
  const double passes = replicas + 3.0 + (shared_weights ? 1 : replicas);
  report(state, run, passes * static_cast<double>(total(r->sizes)) * sizeof(float), 2);
}

void register_all() {
  if (total(resnet18_parameter_sizes()) != 11'181'642) throw std::logic_error("not ResNet-18's parameter count");
  benchmark::RegisterBenchmark("momentum_step/threads", optimizer_step, OptimizerConfig{.momentum = 0.9}, 5.0, false)
      ->Arg(1)
      ->Arg(2)
      ->Iterations(1)
      ->UseRealTime();
  benchmark::RegisterBenchmark("momentum_step_mirrored/threads", optimizer_step, OptimizerConfig{.momentum = 0.9}, 6.0,
                               true)
      ->Arg(1)
      ->Arg(2)
      ->Iterations(1)
      ->UseRealTime();
  benchmark::RegisterBenchmark("adam_step/threads", optimizer_step, OptimizerConfig{.kind = OptimizerKind::adam}, 7.0,
                               false)
      ->Arg(1)
      ->Arg(2)
      ->Iterations(1)
      ->UseRealTime();
  benchmark::RegisterBenchmark("dp2_sum_then_step", sum_then_step)->Iterations(1)->UseRealTime();
  benchmark::RegisterBenchmark("dp2_sharded_step", sharded_step, 2, false)->Iterations(1)->UseRealTime();
  benchmark::RegisterBenchmark("dp2_sharded_step_shared_weights", sharded_step, 2, true)->Iterations(1)->UseRealTime();
  benchmark::RegisterBenchmark("dp3_sharded_step_shared_weights", sharded_step, 3, true)->Iterations(1)->UseRealTime();
  benchmark::RegisterBenchmark("dp4_sharded_step_shared_weights", sharded_step, 4, true)->Iterations(1)->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) { return bench::run_benchmarks(argc, argv, &register_all); }
