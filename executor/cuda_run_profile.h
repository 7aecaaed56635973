// Where a CUDA session's runs spend their time, node by node: with ONNXTRAIN_CUDA_PROFILE=1 in the
// environment every InferenceSession on a CUDA device times its runs and prints a table to stderr when it
// ends (onnxtrain train --device cuda, the benchmarks, the tests). Per op type: the GPU time between timing
// events recorded around each node's kernels, and the host time spent preparing and enqueueing them. When
// a node's host time reaches its GPU time the GPU waited for the host (launch-bound); the GPU time "between
// runs" is what the stream ran or idled outside the session's runs (the optimizer step, uploads of values
// changed on the host, the host's own work of the step). The first run is left out (cuDNN's algorithm
// search, first allocations). Timing events serialise nothing but add a few microseconds a node: compare
// totals with a run without the variable.
//
//   CudaRunProfile profile("training graph, 512 nodes, cuda:0");
//   profile.add_run(node_timings, {.wall_ms = 95, .uploads_ms = 1, .downloads_ms = 0.5, .between_runs_ms = 2});
//   std::fputs(profile.report().c_str(), stderr);
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace onnxtrain {

namespace cuda {
class DeviceEvent;
class DeviceStream;
}  // namespace cuda

// Whether ONNXTRAIN_CUDA_PROFILE asks for profiles (set and not "0").
bool cuda_profile_requested();

struct NodeTiming {
  std::string op_type;
  double gpu_ms = 0;   // between the events before and after the node's kernels
  double host_ms = 0;  // preparing and enqueueing them
};

struct RunTiming {
  double wall_ms = 0;               // the run on the host, first upload to the end of its synchronisation
  double uploads_ms = 0;            // GPU time of the input and initializer uploads before the first node
  double downloads_ms = 0;          // after the last node
  double between_runs_ms = -1;      // GPU time since the previous run's end; < 0: not counted (the first gaps)
  double host_between_runs_ms = 0;  // host time since the previous run returned
};

// Sums of runs by op type (plain arithmetic: tested without a GPU).
class CudaRunProfile {
 public:
  explicit CudaRunProfile(std::string label) : label_(std::move(label)) {}
  void add_run(std::span<const NodeTiming> nodes, const RunTiming& run);
  int64_t runs() const { return runs_; }
  // The table, per run: op types by GPU time (the `top` largest, then the rest in one line), and totals.
  std::string report(size_t top = 20) const;

 private:
  struct Totals {
    int64_t nodes = 0;  // calls over all runs
    double gpu_ms = 0, host_ms = 0;
  };
  std::string label_;
  int64_t runs_ = 0, runs_with_gap_ = 0;
  double max_between_runs_ms_ = 0;
  std::map<std::string, Totals> by_op_;
  RunTiming sums_{.between_runs_ms = 0};
};

// Host time of a named phase outside the session runs (the trainer's own work of a step, the wait for the
// data loader), summed while ONNXTRAIN_CUDA_PROFILE is set and printed to stderr when the process exits,
// so the GPU time between runs can be told apart: host work, or GPU work outside the sessions.
//   { HostPhaseTimer t("optimizer step (enqueue)"); step(); }
class HostPhaseTimer {
 public:
  explicit HostPhaseTimer(const char* name);
  ~HostPhaseTimer();
  HostPhaseTimer(const HostPhaseTimer&) = delete;
  HostPhaseTimer& operator=(const HostPhaseTimer&) = delete;

 private:
  const char* name_;
  double start_ms_ = -1;  // < 0: not profiling
};

// The events of one session's runs: `begin` at the run's start, `node_done` after each node (in run order),
// `end` before the run's synchronisation, `finish` after it, which feeds the profile. Skips the first run,
// and the gap after it.
class CudaRunTimer {
 public:
  CudaRunTimer(int device, std::string label);
  ~CudaRunTimer();  // prints the report to stderr when a run after the first was timed
  void begin(const cuda::DeviceStream& stream);
  void nodes_begin(const cuda::DeviceStream& stream);
  void node_done(const cuda::DeviceStream& stream, const std::string& op_type, double host_ms);
  void end(const cuda::DeviceStream& stream);
  void finish(const cuda::DeviceStream& stream);

 private:
  cuda::DeviceEvent& event(size_t i);
  int device_;
  CudaRunProfile profile_;
  std::vector<std::unique_ptr<cuda::DeviceEvent>> events_;  // begin, nodes_begin, one per node, end
  std::unique_ptr<cuda::DeviceEvent> previous_end_;         // recorded after the previous run's synchronisation
  std::vector<NodeTiming> nodes_;
  size_t recorded_ = 0;
  double wall_start_ = 0, previous_finish_ = 0;
  int64_t runs_finished_ = 0;
};

}  // namespace onnxtrain
