// One measured run of `onnxtrain bench`: `onnxtrain train` started as a child process (the real
// executor, exactly as a user runs it), its --metrics read back, its peak RSS taken from wait4.
// A process per run keeps runs from sharing caches, allocator pools or thread pools, and gives each
// its own peak RSS.
//
//   BenchRunSpec spec{.model = "models/cnn_opset17.onnx", .data = "synthetic:1,28,28:10:736", .batch = 32,
//                     .steps = 20, .warmup = 3, .threads = 2, .workdir = "/tmp/bench"};
//   MeasuredRun r = run_bench_once(spec, strategy, "cnn-dp2-r0");   // r.samples_per_s, r.report ...
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "simulator/strategy_spec.h"

namespace onnxtrain::cli {

struct BenchRunSpec {
  std::string model, data;
  int64_t batch = 32, steps = 20, warmup = 3;
  int threads = 0;  // OMP_NUM_THREADS of the child; 0: inherit
  uint64_t seed = 0;
  std::string workdir;                  // where the run's metrics, log and model go
  std::vector<std::string> extra_args;  // more `onnxtrain train` options (--plan FILE)
  bool trace = false;                   // pipelines: also write a Chrome trace of the run (train --trace)
};

struct MeasuredRun {
  bool ok = false;
  std::string error;                              // the child's exit status and the end of its output, when !ok
  double samples_per_s = 0;                       // over steps warmup+1 .. warmup+steps
  double seconds = 0;                             // wall time of those steps
  double final_loss = 0;                          // the loss of the last step
  int64_t peak_rss_bytes = 0;                     // the child's maximum resident set (getrusage)
  std::vector<std::pair<int64_t, float>> losses;  // (step, loss) of every step
  double mean_staleness = -1;                     // ps: mean staleness of the pushes; -1 when the strategy has none
  nlohmann::json report;                          // the strategy's {"report": ...} line (null for single, cs, ps)
  std::string trace_path;                         // the run's Chrome trace, when spec.trace
  double started_at = 0;                          // when the child started, Unix seconds
};

// The path of the running onnxtrain binary (/proc/self/exe).
std::string self_executable();

// Runs `onnxtrain train` for `strategy` on `spec`; `tag` names its files in spec.workdir. Never throws for
// a failed child (ok = false, error says why); throws Error when the child cannot be started.
MeasuredRun run_bench_once(const BenchRunSpec& spec, const StrategySpec& strategy, const std::string& tag);

}  // namespace onnxtrain::cli
