#include "tools/bench_predict.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <cstdio>
#include <exception>
#include <thread>
#include <tuple>

#include "executor/comm/local_comm.h"
#include "executor/trainer.h"
#include "graph/error.h"
#include "partitioner/cost_model.h"
#include "partitioner/cpu_probe.h"
#include "partitioner/node_profiler.h"
#include "partitioner/plan_io.h"
#include "partitioner/planner.h"

namespace onnxtrain::cli {

BenchPredictor::BenchPredictor(const std::string& model_path, const std::string& loss)
    : model_path_(model_path), loss_(loss), model_(import_model(model_path)),
      prepared_(std::make_unique<Trainer>(model_.graph, TrainerOptions{.loss = parse_loss_spec(loss_)})),
      cpu_(measure_local_cpu()) {
  for (const NodeCost& n : build_cost_profile(prepared_->training_graph(), 1, cpu_).nodes) parameter_bytes_ += n.parameter_bytes;
}

const CostProfile& BenchPredictor::profile_at(int64_t batch, int threads, int workers) {
  const auto key = std::tuple(batch, threads, workers);
  if (auto it = profiles_.find(key); it != profiles_.end()) return it->second;
  const TrainingGraph& training = prepared_->training_graph();
  CostProfile profile = build_cost_profile(training, batch, cpu_);
  profile.model = model_path_;
  // `workers` profiles at once, each on its own thread with the OpenMP threads one worker of the strategy
  // has: the workers of a run share the caches and the memory bandwidth, and their kernels are slower
  // together than one alone. Each node's time is the mean over the workers.
  std::vector<NodeTimes> times(static_cast<size_t>(workers));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(workers));
  std::vector<std::thread> running;
  for (int w = 0; w < workers; ++w) {
    running.emplace_back([&, w] {
      try {
        omp_set_num_threads(threads);
        times[static_cast<size_t>(w)] = measure_node_times(training, batch, {.repetitions = 5, .warmup = 1, .max_seconds = 20});
      } catch (...) {
        errors[static_cast<size_t>(w)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : running) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  for (size_t i = 0; i < profile.nodes.size(); ++i) {
    double forward = 0, backward = 0;
    for (const NodeTimes& t : times) forward += t.forward_seconds.at(i), backward += t.backward_seconds.at(i);
    profile.nodes[i].forward_seconds = forward / workers;
    profile.nodes[i].backward_seconds = backward / workers;
  }
  return profiles_.emplace(key, std::move(profile)).first->second;
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
        if (r == 0 && i > 0) seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
    });
  }
  for (std::thread& t : running) t.join();
  std::sort(seconds.begin(), seconds.end());
  return allreduce_[ranks] = seconds[seconds.size() / 2];
}

double BenchPredictor::step_seconds(int64_t batch, int threads, int workers) {
  double seconds = 0;
  for (const NodeCost& n : profile_at(batch, threads, workers).nodes) seconds += n.forward_seconds + n.backward_seconds;
  return seconds;
}

Prediction BenchPredictor::predict(const BenchStrategy& s, int64_t batch, int threads, const std::string& plan_path) {
  Prediction p;
  const int workers = s.workers;
  const int per_worker = std::max(1, threads / workers);
  const double memory_bandwidth = cpu_.memory_bandwidth > 0 ? cpu_.memory_bandwidth : 1e10;
  // The optimizer's update of `bytes` of parameters: momentum SGD (train's default) reads the weights,
  // the gradients and the momentum and writes the weights and the momentum, 5 passes over memory.
  auto update_seconds = [&](double bytes) { return 5.0 * bytes / memory_bandwidth; };
  const double update = update_seconds(static_cast<double>(parameter_bytes_));
  char basis[320];
  if (s.kind == "single") {
    const double step = step_seconds(batch, threads, 1) + update;
    p.samples_per_s = static_cast<double>(batch) / step;
    std::snprintf(basis, sizeof basis, "profiled step %.2f ms on %d threads, update %.2f ms included", 1e3 * step,
                  threads, 1e3 * update);
  } else if (s.kind == "dp" || s.kind == "cs") {
    const int64_t rows = std::max<int64_t>(1, batch / workers);
    const double compute = step_seconds(rows, per_worker, workers);
    const double reduce = allreduce_seconds(workers);
    p.samples_per_s = static_cast<double>(batch) / (compute + reduce + update);
    std::snprintf(basis, sizeof basis, "replica step %.2f ms (%lld rows, %d threads, %d at once) + all-reduce %.2f ms + "
                  "update %.2f ms", 1e3 * compute, static_cast<long long>(rows), per_worker, workers, 1e3 * reduce,
                  1e3 * update);
  } else if (s.kind == "ps") {
    const double compute = step_seconds(batch, per_worker, workers);
    const double exchange = 2.0 * static_cast<double>(parameter_bytes_) / memory_bandwidth;
    p.samples_per_s = workers * static_cast<double>(batch) / (compute + exchange + update);
    std::snprintf(basis, sizeof basis, "%d workers, each a step of %.2f ms (%d threads) + push/pull %.2f ms + update "
                  "%.2f ms", workers, 1e3 * compute, per_worker, 1e3 * exchange, 1e3 * update);
  } else {
    const int64_t micro = s.kind == "gpipe" ? std::max<int64_t>(1, batch / s.micro_batches) : batch;
    const CostProfile& profile = profile_at(micro, per_worker, workers);
    const Plan plan = plan_pipeline(profile, {.stages = workers, .schedule = parse_plan_schedule(s.kind),
                                              .micro_batches = s.micro_batches,
                                              .link = {cpu_.link.name, cpu_.link.bandwidth, cpu_.link.latency_s}});
    write_plan(plan, plan_path);
    p.plan_path = plan_path;
    const bool flushes = s.kind == "gpipe";
    // Each stage updates its own parameters: 1F1B after every backward (in the stage's slot), gpipe once
    // per flush (after its makespan; the slowest stage's update ends it).
    double slot = 0, last_update = 0;
    for (const StagePlan& st : plan.stages) {
      const double stage_update = update_seconds(static_cast<double>(st.parameter_bytes));
      slot = std::max(slot, st.time_seconds + stage_update);
      last_update = std::max(last_update, stage_update);
    }
    p.samples_per_s = flushes ? static_cast<double>(micro * s.micro_batches) / (plan.makespan_seconds + last_update)
                              : static_cast<double>(micro) / slot;
    // gpipe: fill, drain and imbalance of a flush; 1F1B in steady state: the stages' mean imbalance idling.
    double idle = 0;
    for (const StagePlan& st : plan.stages) idle += st.idle_fraction;
    p.bubble_fraction = flushes ? 1.0 - plan.utilisation : idle / static_cast<double>(plan.stages.size());
    std::string stages;
    for (const StagePlan& st : plan.stages) {
      p.stage_seconds.push_back(st.time_seconds);
      p.stage_memory_bytes.push_back(st.memory.total);
      p.stage_first_nodes.push_back(st.first_node);
      char item[48];
      std::snprintf(item, sizeof item, "%s%.2f", stages.empty() ? "" : "/", 1e3 * st.time_seconds);
      stages += item;
    }
    std::snprintf(basis, sizeof basis, "planned split, stage slots %s ms (micro-batch %lld, %d threads each, %d at "
                  "once) + each stage's update%s", stages.c_str(), static_cast<long long>(micro), per_worker, workers,
                  flushes ? (", flush of " + std::to_string(s.micro_batches)).c_str() : ", 1F1B steady state");
  }
  p.basis = basis;
  return p;
}

}  // namespace onnxtrain::cli
