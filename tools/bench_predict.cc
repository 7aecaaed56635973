#include "tools/bench_predict.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>

#include "executor/trainer.h"
#include "graph/error.h"
#include "partitioner/cost_model.h"
#include "partitioner/cpu_probe.h"
#include "partitioner/node_profiler.h"
#include "partitioner/plan_io.h"
#include "partitioner/planner.h"

namespace onnxtrain::cli {

BenchPredictor::BenchPredictor(const std::string& model_path, const std::string& loss)
    : model_path_(model_path), loss_(loss), model_(import_model(model_path)), cpu_(measure_local_cpu()) {}

const CostProfile& BenchPredictor::profile_at(int64_t batch, int threads) {
  const auto key = std::pair(batch, threads);
  if (auto it = profiles_.find(key); it != profiles_.end()) return it->second;
  Trainer prepared(model_.graph, {.loss = parse_loss_spec(loss_)});
  const TrainingGraph& training = prepared.training_graph();
  CostProfile profile = build_cost_profile(training, batch, cpu_);
  profile.model = model_path_;
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);  // the kernels are timed with the threads one worker of the strategy has
  try {
    apply_profiled_times(profile, training, "", {.repetitions = 5, .warmup = 1, .max_seconds = 20});
  } catch (...) {
    omp_set_num_threads(before);
    throw;
  }
  omp_set_num_threads(before);
  return profiles_.emplace(key, std::move(profile)).first->second;
}

double BenchPredictor::step_seconds(int64_t batch, int threads) {
  double seconds = 0;
  for (const NodeCost& n : profile_at(batch, threads).nodes) seconds += n.forward_seconds + n.backward_seconds;
  return seconds;
}

int64_t BenchPredictor::parameter_bytes() {
  int64_t bytes = 0;
  for (const NodeCost& n : profile_at(1, 1).nodes) bytes += n.parameter_bytes;
  return bytes;
}

Prediction BenchPredictor::predict(const BenchStrategy& s, int64_t batch, int threads, const std::string& plan_path) {
  Prediction p;
  const int workers = s.workers;
  const int per_worker = std::max(1, threads / workers);
  const double memory_bandwidth = cpu_.memory_bandwidth > 0 ? cpu_.memory_bandwidth : 1e10;
  char basis[256];
  if (s.kind == "single") {
    const double step = step_seconds(batch, threads);
    p.samples_per_s = static_cast<double>(batch) / step;
    std::snprintf(basis, sizeof basis, "profiled step %.2f ms on %d threads", 1e3 * step, threads);
  } else if (s.kind == "dp" || s.kind == "cs") {
    const int64_t rows = std::max<int64_t>(1, batch / workers);
    const double compute = step_seconds(rows, per_worker);
    const double reduce = 2.0 * (workers - 1) / workers * static_cast<double>(parameter_bytes()) / memory_bandwidth;
    p.samples_per_s = static_cast<double>(batch) / (compute + reduce);
    std::snprintf(basis, sizeof basis, "replica step %.2f ms (%lld rows, %d threads) + all-reduce %.2f ms",
                  1e3 * compute, static_cast<long long>(rows), per_worker, 1e3 * reduce);
  } else if (s.kind == "ps") {
    const double compute = step_seconds(batch, per_worker);
    const double exchange = 2.0 * static_cast<double>(parameter_bytes()) / memory_bandwidth;
    p.samples_per_s = workers * static_cast<double>(batch) / (compute + exchange);
    std::snprintf(basis, sizeof basis, "%d workers, each a step of %.2f ms (%d threads) + push/pull %.2f ms", workers,
                  1e3 * compute, per_worker, 1e3 * exchange);
  } else {
    const int64_t micro = s.kind == "gpipe" ? std::max<int64_t>(1, batch / s.micro_batches) : batch;
    const CostProfile& profile = profile_at(micro, per_worker);
    const Plan plan = plan_pipeline(profile, {.stages = workers, .schedule = parse_plan_schedule(s.kind),
                                              .micro_batches = s.micro_batches,
                                              .link = {cpu_.link.name, cpu_.link.bandwidth, cpu_.link.latency_s}});
    write_plan(plan, plan_path);
    p.plan_path = plan_path;
    const bool flushes = s.kind == "gpipe";
    p.samples_per_s = static_cast<double>(micro) * (flushes ? plan.throughput : plan.steady_throughput);
    // gpipe: fill, drain and imbalance of a flush; 1F1B in steady state: the stages' mean imbalance idling.
    double idle = 0;
    for (const StagePlan& st : plan.stages) idle += st.idle_fraction;
    p.bubble_fraction = flushes ? 1.0 - plan.utilisation : idle / static_cast<double>(plan.stages.size());
    std::string stages;
    for (const StagePlan& st : plan.stages) {
      p.stage_seconds.push_back(st.time_seconds);
      p.stage_memory_bytes.push_back(st.memory.total);
      char item[48];
      std::snprintf(item, sizeof item, "%s%.2f", stages.empty() ? "" : "/", 1e3 * st.time_seconds);
      stages += item;
    }
    std::snprintf(basis, sizeof basis, "planned split, stage slots %s ms (micro-batch %lld, %d threads each)%s",
                  stages.c_str(), static_cast<long long>(micro), per_worker,
                  flushes ? (", flush of " + std::to_string(s.micro_batches)).c_str() : ", 1F1B steady state");
  }
  p.basis = basis;
  return p;
}

}  // namespace onnxtrain::cli
