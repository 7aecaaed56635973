// What a hand-off between two threads of one process costs: a round trip of a small tensor through the
// local communicator (send_shared, as pipeline stages pass their activations) and a barrier of two ranks
// (as data-parallel replicas meet twice a step), each against the same round trip through a bare
// std::condition_variable (a thread blocked in the kernel, woken by a futex: what every wait cost before
// graph/spin_then_wait.h). Prints us per round trip and the ratio to the condition variable's.
//
//   build/release/benchmarks/thread_handoff_bench
//
// The local communicator polls only while other processes leave the CPUs idle (spin_waiting_pays), so run
// it on an idle machine of 2 or more CPUs.
#include <benchmark/benchmark.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "executor/comm/local_comm.h"
#include "graph/spin_then_wait.h"
#include "graph/tensor.h"

namespace onnxtrain {
namespace {

constexpr auto kTimeout = std::chrono::seconds(60);

// Two threads taking turns on one integer under a condition variable.
class CvTurns {
 public:
  void pass(int to) {
    {
      std::lock_guard lock(mutex_);
      turn_ = to;
    }
    cv_.notify_all();
  }
  void await(int me) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return turn_ == me || turn_ < 0; });
  }
  bool stopped() {
    std::lock_guard lock(mutex_);
    return turn_ < 0;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int turn_ = 0;
};

using Clock = std::chrono::steady_clock;

// us per round trip of `rounds` passes there and back between this thread and another through CvTurns.
double condition_variable_round_trip_us(int rounds) {
  CvTurns turns;
  std::thread peer([&] {
    while (true) {
      turns.await(1);
      if (turns.stopped()) return;
      turns.pass(0);
    }
  });
  const auto start = Clock::now();
  for (int i = 0; i < rounds; ++i) {
    turns.pass(1);
    turns.await(0);
  }
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / rounds;
  turns.pass(-1);
  peer.join();
  return us;
}

// Times `round_trip` over the benchmark's iterations and reports it beside the condition variable's.
template <class RoundTrip>
void time_against_condition_variable(benchmark::State& state, RoundTrip round_trip) {
  const double cv_us = condition_variable_round_trip_us(2000);
  const auto start = Clock::now();
  for (auto _ : state) round_trip();
  const double us =
      std::chrono::duration<double, std::micro>(Clock::now() - start).count() / static_cast<double>(state.iterations());
  state.counters["us"] = us;
  state.counters["cv_us"] = cv_us;
  state.counters["speedup_vs_cv"] = cv_us / us;
  state.counters["polls"] = spin_waiting_pays(2) ? 1 : 0;
}

void BM_LocalCommRoundTrip(benchmark::State& state) {
  auto group = make_local_group(2, kTimeout);
  const Tensor message(DType::Float32, {1});
  const CommTag tag{.kind = CommTag::activation};
  std::thread peer([&] {
    while (true) {
      Tensor t = group[1]->recv(0, tag, "bench peer");
      if (t.numel() == 0) return;
      group[1]->send_shared(0, tag, t, "bench peer");
    }
  });
  time_against_condition_variable(state, [&] {
    group[0]->send_shared(1, tag, message, "bench");
    benchmark::DoNotOptimize(group[0]->recv(1, tag, "bench"));
  });
  group[0]->send(1, tag, Tensor(DType::Float32, {0}), "bench stop");
  peer.join();
}
BENCHMARK(BM_LocalCommRoundTrip)->UseRealTime();

void BM_LocalCommBarrier(benchmark::State& state) {
  auto group = make_local_group(2, kTimeout);
  std::thread peer([&] {
    for (benchmark::IterationCount i = 0; i < state.max_iterations; ++i) group[1]->barrier("bench peer");
  });
  time_against_condition_variable(state, [&] { group[0]->barrier("bench"); });
  peer.join();
}
BENCHMARK(BM_LocalCommBarrier)->UseRealTime();

}  // namespace
}  // namespace onnxtrain

int main(int argc, char** argv) {
  // The first sample of the machine's load, then time for a decision (spin_waiting_pays).
  onnxtrain::start_spin_wait_policy();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  onnxtrain::spin_waiting_pays(2);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
