// What `onnxtrain bench` expects of each strategy before it runs it: the event simulation
// (simulator/strategy_simulation.h) of the strategy on this machine, with per-node times measured here at
// start (partitioner/node_profiler.h) at the micro-batch and thread count each worker of the strategy will
// have, with as many measurements running at once as the strategy has workers (they share caches and
// memory bandwidth). This machine, as the simulator sees it: one device per worker (threads / workers
// threads each), pipeline neighbours joined by shared memory, dp's ring at the bandwidth that the local
// backend's measured all-reduce of the parameters implies, central storage and parameter servers copying
// at the measured memory bandwidth, the update 5 passes over the parameters (momentum SGD).
//
// A pipeline's prediction comes with its plan, written to a file that the measured run is given
// (--plan), so the measured split is the predicted one. What the model leaves out (the loss, the data,
// per-step overheads, a replica waiting for the slower one) shows in the predicted/measured ratio.
//
//   BenchPredictor predictor(model_path, "cross-entropy");
//   Prediction p = predictor.predict(strategy, 32, /*threads=*/2, "/tmp/bench/plan-cnn-pipedream2.json", 3, 20);
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "frontend/importer.h"
#include "graph/autodiff/training_recipe.h"
#include "partitioner/cost_profile.h"
#include "partitioner/device.h"
#include "simulator/event_simulation.h"
#include "simulator/strategy_spec.h"

namespace onnxtrain::cli {

struct Prediction {
  double samples_per_s = 0;
  double bubble_fraction = 0;                  // pipelines: the planner's fill-and-drain plus imbalance idling
  std::vector<double> stage_seconds;           // pipelines: each stage's slot per micro-batch
  std::vector<int64_t> stage_memory_bytes;     // per stage or replica: the simulated peak memory
  std::vector<int64_t> stage_first_nodes;      // pipelines: the split (each stage's first forward node)
  std::string plan_path;                       // pipelines: the plan the measured run uses
  std::string basis;                           // one line: what the figure is made of
  std::shared_ptr<const EventSimulation> sim;  // the simulated timeline, for the trace beside the measured one
};

class BenchPredictor {
 public:
  // Imports the model (its sequence axis bound to seq_len when it has one) and measures the local CPU
  // (GEMM rate, memory bandwidth) once.
  BenchPredictor(const std::string& model_path, const std::string& loss, int64_t seq_len = 0);

  // Throws Error when the model cannot be profiled (a node without a CPU kernel, unknown sizes).
  // `threads`: what the run shares out among its workers.
  // `warmup` and `steps`: the run's untimed and timed steps.
  Prediction predict(const StrategySpec& strategy, int64_t batch, int threads, const std::string& plan_path,
                     int64_t warmup, int64_t steps);

 private:
  // The profile of the training graph at `batch`, its node times measured on `threads` threads while
  // `workers` such measurements run at once (as the strategy's workers do; cached).
  // `summed` > 1: the nodes timed as a flushing pipeline's micro-batches (NodeProfileOptions).
  // `time_shared` >= 1: every node time multiplied by it (more workers' threads than CPUs, below); the
  // measurement behind it is the one of time_shared 1, made once.
  const CostProfile& profile_at(int64_t batch, int threads, int workers, int summed, double time_shared = 1);
  // The local backend's all-reduce of the parameters' size over `ranks` threads, measured (cached).
  double allreduce_seconds(int ranks);

  std::string model_path_, loss_;
  ImportedModel model_;
  TrainingGraph training_;  // the graph every profile times (the loss attached once)
  DeviceDescription cpu_;
  int64_t parameter_bytes_ = 0;
  std::map<std::tuple<int64_t, int, int, int, double>, CostProfile> profiles_;
  std::map<int, double> allreduce_;
  std::map<int, double> memory_bandwidth_;  // by OpenMP threads

  double memory_bandwidth_at(int threads);
};

}  // namespace onnxtrain::cli
