// What `onnxtrain bench` expects of each strategy before it runs it: the cost model with per-node times
// measured on this machine at start (partitioner/node_profiler.h), at the micro-batch and thread count
// each worker of the strategy will have, priced by the planner (partitioner/planner.h):
//
//   single        B / Σ_nodes (forward + backward), the profile at B on T threads
//   dp:R, cs:R    B / (Σ at B/R on T/R threads + ring all-reduce 2(R−1)/R · P / memory bandwidth)
//   ps:W:S        W · B / (Σ at B on T/W threads + push and pull 2 · P / memory bandwidth): W workers at once
//   pipelines     the planner's split at micro-batch b (B, or B/M for gpipe) on T/N threads per stage:
//                 1F1B steady state b / bottleneck; gpipe M · b / makespan of a flush
//
// A pipeline's prediction comes with its plan, written to a file that the measured run is given
// (--plan), so the measured split is the predicted one. What the model leaves out (the optimizer's
// update, the loss, per-step overheads) shows in the predicted/measured ratio.
//
//   BenchPredictor predictor(model_path, "cross-entropy");
//   Prediction p = predictor.predict(strategy, 32, /*threads=*/2, "/tmp/bench/plan-cnn-pipedream2.json");
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "frontend/importer.h"
#include "partitioner/cost_profile.h"
#include "partitioner/device.h"
#include "tools/bench_strategies.h"

namespace onnxtrain::cli {

struct Prediction {
  double samples_per_s = 0;
  double bubble_fraction = 0;               // pipelines: the planner's fill-and-drain plus imbalance idling
  std::vector<double> stage_seconds;        // pipelines: each stage's slot per micro-batch
  std::vector<int64_t> stage_memory_bytes;  // pipelines: the planner's memory per stage
  std::string plan_path;                    // pipelines: the plan the measured run uses
  std::string basis;                        // one line: what the figure is made of
};

class BenchPredictor {
 public:
  // Imports the model and measures the local CPU (GEMM rate, memory bandwidth) once.
  BenchPredictor(const std::string& model_path, const std::string& loss);

  // Throws Error when the model cannot be profiled (a node without a CPU kernel, unknown sizes).
  // `threads`: what the run shares out among its workers.
  Prediction predict(const BenchStrategy& strategy, int64_t batch, int threads, const std::string& plan_path);

 private:
  // The profile of the training graph at `batch` with node times measured on `threads` threads (cached).
  const CostProfile& profile_at(int64_t batch, int threads);
  double step_seconds(int64_t batch, int threads);  // Σ forward + backward over the nodes
  int64_t parameter_bytes();

  std::string model_path_, loss_;
  ImportedModel model_;
  DeviceDescription cpu_;
  std::map<std::pair<int64_t, int>, CostProfile> profiles_;
};

}  // namespace onnxtrain::cli
