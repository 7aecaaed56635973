#include "tools/bench_predict.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <thread>
#include <tuple>

#include "executor/comm/local_comm.h"
#include "executor/pipeline/schedule.h"
#include "executor/trainer.h"
#include "graph/error.h"
#include "partitioner/cost_model.h"
#include "partitioner/cpu_probe.h"
#include "partitioner/node_profiler.h"
#include "partitioner/plan_io.h"
#include "partitioner/planner.h"
#include "simulator/strategy_simulation.h"
#include "tools/model_import.h"

namespace onnxtrain::cli {

namespace {

LossSpec loss_for(const Graph& model, const std::string& loss) {
  LossSpec spec = parse_loss_spec(loss);
  spec.classes_last = is_language_model(model);  // (N, T, V) logits against (N, T) labels
  return spec;
}

}  // namespace

BenchPredictor::BenchPredictor(const std::string& model_path, const std::string& loss, int64_t seq_len)
    : model_path_(model_path),
      loss_(loss),
      model_(import_for_costs(model_path, seq_len)),
      training_(make_training_recipe(model_.graph, {.loss = loss_for(model_.graph, loss_)}).training),
      cpu_(measure_local_cpu()) {
  for (const NodeCost& n : build_cost_profile(training_, 1, cpu_).nodes) parameter_bytes_ += n.parameter_bytes;
  memory_bandwidth_[omp_get_max_threads()] = cpu_.memory_bandwidth;  // what measure_local_cpu measured on
}

const CostProfile& BenchPredictor::profile_at(int64_t batch, int threads, int workers, int summed, double time_shared) {
  const auto key = std::tuple(batch, threads, workers, summed, time_shared);
  if (auto it = profiles_.find(key); it != profiles_.end()) return it->second;
  if (time_shared != 1) {
    // The same measurement at another share of a CPU: the measured profile scaled, nothing timed again.
    CostProfile shared = profile_at(batch, threads, workers, summed);
    for (NodeCost& n : shared.nodes) {
      n.forward_seconds *= time_shared;
      n.backward_seconds *= time_shared;
    }
    return profiles_.emplace(key, std::move(shared)).first->second;
  }
  const TrainingGraph& training = training_;
  CostProfile profile = build_cost_profile(training, batch, cpu_);
  profile.model = model_path_;
  profile.memory_bandwidth = memory_bandwidth_at(threads);  // a pipeline stage's update runs on its threads
  // `workers` profiles at once, each on its own thread with the OpenMP threads one worker of the strategy
  // has: the workers of a run share the caches and the memory bandwidth, and their kernels are slower
  // together than one alone. Each node's times are the mean over the workers.
  // Worker 0 runs on this thread: a second OpenMP team (a team started from another thread) would make
  // libgomp count more threads than CPUs and throttle its spin-wait, after which every parallel region wakes
  // its workers through the kernel: ResNet-18's node times on 2 threads summed to those of 1 thread (67
  // against 37 ms), so bench predicted `single` on 2 threads at 0.57 of its measured speed.
  std::vector<NodeTimes> times(static_cast<size_t>(workers));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(workers));
  const auto measure = [&](int w) {
    try {
      omp_set_num_threads(threads);
      times[static_cast<size_t>(w)] = measure_node_times(
          training, batch, {.repetitions = 5, .warmup = 1, .max_seconds = 20, .micro_batches_summed = summed});
    } catch (...) {
      errors[static_cast<size_t>(w)] = std::current_exception();
    }
  };
  std::vector<std::thread> running;
  for (int w = 1; w < workers; ++w) running.emplace_back(measure, w);
  const int saved_threads = omp_get_max_threads();
  measure(0);
  omp_set_num_threads(saved_threads);
  for (std::thread& t : running) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  apply_mean_node_times(profile, times);
  return profiles_.emplace(key, std::move(profile)).first->second;
}

double BenchPredictor::memory_bandwidth_at(int threads) {
  if (auto it = memory_bandwidth_.find(threads); it != memory_bandwidth_.end()) return it->second;
  return memory_bandwidth_[threads] = measure_memory_bandwidth(threads);
}

double BenchPredictor::allreduce_seconds(int ranks) {
  if (ranks < 2) return 0;
  if (auto it = allreduce_.find(ranks); it != allreduce_.end()) return it->second;
  // The local backend's all-reduce of one gradient-sized buffer over `ranks` threads, as dp runs it: one
  // warm-up, then the median of 3.
  const std::vector<std::unique_ptr<Communicator>> group = make_local_group(ranks, std::chrono::seconds(60));
  const auto floats = static_cast<size_t>(parameter_bytes_ / 4);
  std::vector<double> seconds;
  std::vector<std::thread> running;
  for (int r = 0; r < ranks; ++r) {
    running.emplace_back([&, r] {
      std::vector<float> data(floats, 1.0f);
      for (int i = 0; i < 4; ++i) {
        const auto start = std::chrono::steady_clock::now();
        group[static_cast<size_t>(r)]->all_reduce_sum(data, "bench all-reduce probe");
        if (r == 0 && i > 0)
          seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
    });
  }
  for (std::thread& t : running) t.join();
  std::sort(seconds.begin(), seconds.end());
  return allreduce_[ranks] = seconds[seconds.size() / 2];
}

Prediction BenchPredictor::predict(const StrategySpec& s, int64_t batch, int threads, const std::string& plan_path,
                                   int64_t warmup, int64_t steps) {
  const int devices = s.devices();
  // Replicas or workers whose threads outnumber the CPUs take turns on them (cpu_share): a node timed
  // while its thread runs (the median of its runs) says nothing of the time the thread waits for a CPU.
  // So no more profiles run at once than the CPUs hold, and the simulated devices, all computing at once,
  // get their CPU share's speed. dp:4 on 2 CPUs was predicted at 1.31 (ResNet-18) and 3.0 (CNN) of its
  // measured speed without this. Pipeline stages beyond the CPUs compute when one is free (the
  // simulation's processor pool): gpipe:4x4 and gpipe:8x4 on 2 CPUs were predicted at 1.56 and 2.09 of
  // their measured speed (ResNet-18) while every stage had a CPU of its own.
  const CpuShare share = cpu_share(s, threads);
  const int per_worker = share.per_worker;
  // This machine as the simulator sees it: `devices` groups of `per_worker` threads; pipeline neighbours
  // pass tensors through shared memory (the probe's link), dp's ring runs at the bandwidth the measured
  // all-reduce of the parameters implies, central storage and parameter servers copy at memory bandwidth.
  Machine local;
  local.name = "this machine (" + std::to_string(threads) + " threads)";
  local.devices_per_node = std::max(devices, 1);
  local.device = cpu_;
  // measure_local_cpu gives the physical memory; 0 when the system would not say.
  if (local.device.memory_bytes == 0) local.device.memory_bytes = uint64_t{1} << 40;
  local.device.memory_efficiency = 1.0;  // the measured bandwidth is the one kernels reach
  local.intra_node = local.inter_node = cpu_.link;
  if (!s.is_pipeline() && devices > 1) {
    const double measured = allreduce_seconds(devices);
    const double ring_bytes = 2.0 * (devices - 1) / devices * static_cast<double>(parameter_bytes_);
    local.intra_node = local.inter_node = {"measured all-reduce", measured > 0 ? ring_bytes / measured : 1e12, 0};
  }
  local.host = {"memory copy", cpu_.memory_bandwidth > 0 ? cpu_.memory_bandwidth : 1e10, 0};
  // Each pipeline stage updates its weights on its own `per_worker` threads (dp's sharded step uses all).
  if (s.is_pipeline()) local.device.memory_bandwidth = memory_bandwidth_at(per_worker);
  // gpipe and 1f1b stages sum their micro-batches' gradients in place and reuse the weights' derived values.
  const bool flushes = s.is_pipeline() && strategy_traits(parse_pipeline_strategy(s.kind)).flushes;
  const int summed = flushes ? static_cast<int>(s.micro_batches) : 1;
  const ProfileAt profiles = [&](int64_t micro_batch, int workers) -> const CostProfile& {
    return profile_at(micro_batch, per_worker, std::min(workers, share.at_once), summed, share.time_shared);
  };
  // The run as bench times it: `steps` after `warmup`, the pipeline's drain included.
  const StrategySimulation sim =
      simulate_strategy(s, local, profiles,
                        {.batch = batch,
                         .steps = warmup + steps,
                         .warmup = warmup,
                         .cooldown = 0,
                         .host_executor = true,
                         .processors = share.at_once});  // shared only by pipeline stages beyond it
  Prediction p;
  p.samples_per_s = sim.samples_per_s;
  p.bubble_fraction = sim.bubble_fraction;
  p.sim = sim.sim;
  for (const WorkerFigures& w : sim.workers) p.stage_memory_bytes.push_back(w.peak_memory);
  if (sim.plan) {
    write_plan(*sim.plan, plan_path);
    p.plan_path = plan_path;
    for (const StagePlan& st : sim.plan->stages) {
      p.stage_seconds.push_back(st.time_seconds);
      p.stage_first_nodes.push_back(st.first_node);
    }
  }
  char basis[320];
  std::snprintf(basis, sizeof basis,
                "simulated: step %.2f ms on %d x %d threads (node times profiled %d at once), "
                "limited by %s",
                1e3 * sim.step_seconds, devices, per_worker, share.at_once, sim.limited_by.c_str());
  p.basis = basis;
  return p;
}

}  // namespace onnxtrain::cli
