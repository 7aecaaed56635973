// What `onnxtrain bench` expects of each strategy before it runs it: the cost model with per-node times
// measured on this machine at start (partitioner/node_profiler.h), at the micro-batch and thread count
// each worker of the strategy will have, with as many measurements running at once as the strategy has
// workers (they share caches and memory bandwidth), priced by the planner (partitioner/planner.h):
//
//   U(P) = 5 · P / memory bandwidth: momentum SGD's update of P bytes of parameters (5 passes)
//   single        B / (Σ_nodes (forward + backward) + U(P)), the profile at B on T threads
//   dp:R, cs:R    B / (Σ at B/R on T/R threads + A_R(P) + U(P)), A_R(P): the local backend's all-reduce of
//                 P bytes over R threads, measured at start
//   ps:W:S        W · B / (Σ at B on T/W threads + push and pull 2 · P / memory bandwidth + U(P))
//   pipelines     the planner's split at micro-batch b (B, or B/M for gpipe) on T/N threads per stage:
//                 1F1B steady state b / max_k (slot_k + U(P_k)); gpipe M · b / (makespan + max_k U(P_k))
//
// A pipeline's prediction comes with its plan, written to a file that the measured run is given
// (--plan), so the measured split is the predicted one. What the model leaves out (the loss, the data,
// per-step overheads, a replica waiting for the slower one) shows in the predicted/measured ratio.
//
//   BenchPredictor predictor(model_path, "cross-entropy");
//   Prediction p = predictor.predict(strategy, 32, /*threads=*/2, "/tmp/bench/plan-cnn-pipedream2.json");
#pragma once

#include <map>
#include <memory>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "executor/trainer.h"
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
  std::vector<int64_t> stage_first_nodes;   // pipelines: the split (each stage's first forward node)
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
  // The profile of the training graph at `batch`, its node times measured on `threads` threads while
  // `workers` such measurements run at once (as the strategy's workers do; cached).
  const CostProfile& profile_at(int64_t batch, int threads, int workers);
  double step_seconds(int64_t batch, int threads, int workers);  // Σ forward + backward over the nodes
  // The local backend's all-reduce of the parameters' size over `ranks` threads, measured (cached).
  double allreduce_seconds(int ranks);

  std::string model_path_, loss_;
  ImportedModel model_;
  std::unique_ptr<Trainer> prepared_;  // the training graph every profile times (loss attached once)
  DeviceDescription cpu_;
  int64_t parameter_bytes_ = 0;
  std::map<std::tuple<int64_t, int, int>, CostProfile> profiles_;
  std::map<int, double> allreduce_;
};

}  // namespace onnxtrain::cli
