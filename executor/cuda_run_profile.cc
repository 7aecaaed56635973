#include "executor/cuda_run_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kernels/cuda/cuda_runtime.h"

namespace onnxtrain {

bool cuda_profile_requested() {
  const char* value = std::getenv("ONNXTRAIN_CUDA_PROFILE");
  return value && *value && std::strcmp(value, "0") != 0;
}

void CudaRunProfile::add_run(std::span<const NodeTiming> nodes, const RunTiming& run) {
  ++runs_;
  for (const NodeTiming& n : nodes) {
    Totals& t = by_op_[n.op_type];
    ++t.nodes;
    t.gpu_ms += n.gpu_ms;
    t.host_ms += n.host_ms;
  }
  sums_.wall_ms += run.wall_ms;
  sums_.uploads_ms += run.uploads_ms;
  sums_.downloads_ms += run.downloads_ms;
  if (run.between_runs_ms >= 0) {
    sums_.between_runs_ms += run.between_runs_ms;
    sums_.host_between_runs_ms += run.host_between_runs_ms;
    max_between_runs_ms_ = std::max(max_between_runs_ms_, run.between_runs_ms);
    ++runs_with_gap_;
  }
}

namespace {

std::string line(const char* format, auto... args) {
  char text[256];
  std::snprintf(text, sizeof text, format, args...);
  return text;
}

}  // namespace

std::string CudaRunProfile::report(size_t top) const {
  if (runs_ == 0) return "";
  const double per_run = 1.0 / static_cast<double>(runs_);
  std::vector<std::pair<std::string, Totals>> ops(by_op_.begin(), by_op_.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.gpu_ms > b.second.gpu_ms; });
  double gpu = 0, host = 0;
  for (const auto& [op, t] : ops) gpu += t.gpu_ms, host += t.host_ms;
  std::string text = "ONNXTRAIN_CUDA_PROFILE: " + label_ + ", " + std::to_string(runs_) +
                     " runs after the first (ms per run; host = preparing and enqueueing)\n";
  text += line("  %-28s %7s %10s %10s %6s\n", "op type", "nodes", "GPU ms", "host ms", "GPU %");
  Totals rest;
  size_t rest_types = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const Totals& t = ops[i].second;
    if (i >= top) {
      rest.nodes += t.nodes, rest.gpu_ms += t.gpu_ms, rest.host_ms += t.host_ms, ++rest_types;
      continue;
    }
    text += line("  %-28s %7.1f %10.3f %10.3f %6.1f\n", ops[i].first.c_str(), t.nodes * per_run, t.gpu_ms * per_run,
                 t.host_ms * per_run, gpu > 0 ? 100 * t.gpu_ms / gpu : 0.0);
  }
  if (rest_types) {
    text += line("  %-28s %7.1f %10.3f %10.3f %6.1f\n", ("(" + std::to_string(rest_types) + " more)").c_str(),
                 rest.nodes * per_run, rest.gpu_ms * per_run, rest.host_ms * per_run,
                 gpu > 0 ? 100 * rest.gpu_ms / gpu : 0.0);
  }
  text += line("  nodes: GPU %.3f ms, host %.3f ms; uploads %.3f ms, downloads %.3f ms; wall %.3f ms a run\n",
               gpu * per_run, host * per_run, sums_.uploads_ms * per_run, sums_.downloads_ms * per_run,
               sums_.wall_ms * per_run);
  if (runs_with_gap_) {
    text += line(
        "  between runs (outside this session: optimizer, host work, other sessions): GPU %.3f ms (max %.3f), "
        "host %.3f ms\n",
        sums_.between_runs_ms / static_cast<double>(runs_with_gap_), max_between_runs_ms_,
        sums_.host_between_runs_ms / static_cast<double>(runs_with_gap_));
  }
  return text;
}

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// HostPhaseTimer's sums, printed at exit. The first call apart (first allocations, kernels loaded lazily):
// the later ones are the steady state.
struct HostPhases {
  struct Calls {
    int64_t count = 0;
    double first_ms = 0, later_ms = 0, later_max_ms = 0;
  };
  std::mutex mutex;
  std::map<std::string, Calls> by_name;
  ~HostPhases() {
    if (by_name.empty()) return;
    std::string text = "ONNXTRAIN_CUDA_PROFILE: host phases outside the session runs (ms)\n";
    for (const auto& [name, c] : by_name) {
      const double later_mean = c.count > 1 ? c.later_ms / static_cast<double>(c.count - 1) : 0.0;
      text += line("  %-52s %6lld calls: first %9.3f, later mean %8.3f, max %8.3f\n", name.c_str(),
                   static_cast<long long>(c.count), c.first_ms, later_mean, c.later_max_ms);
    }
    std::fputs(text.c_str(), stderr);
  }
};

HostPhases& host_phases() {
  static HostPhases phases;
  return phases;
}

}  // namespace

HostPhaseTimer::HostPhaseTimer(const char* name) : name_(name) {
  static const bool profiling = cuda_profile_requested();
  if (profiling) start_ms_ = now_ms();
}

HostPhaseTimer::~HostPhaseTimer() {
  if (start_ms_ < 0) return;
  const double ms = now_ms() - start_ms_;
  HostPhases& phases = host_phases();
  std::lock_guard<std::mutex> lock(phases.mutex);
  HostPhases::Calls& c = phases.by_name[name_];
  if (c.count++ == 0) {
    c.first_ms = ms;
  } else {
    c.later_ms += ms;
    c.later_max_ms = std::max(c.later_max_ms, ms);
  }
}

CudaRunTimer::CudaRunTimer(int device, std::string label)
    : device_(device),
      profile_(std::move(label)),
      previous_end_(std::make_unique<cuda::DeviceEvent>(device, cuda::EventTiming::On)) {}

CudaRunTimer::~CudaRunTimer() {
  if (profile_.runs() > 0) std::fputs(profile_.report().c_str(), stderr);
}

cuda::DeviceEvent& CudaRunTimer::event(size_t i) {
  while (events_.size() <= i) events_.push_back(std::make_unique<cuda::DeviceEvent>(device_, cuda::EventTiming::On));
  return *events_[i];
}

void CudaRunTimer::begin(const cuda::DeviceStream& stream) {
  wall_start_ = now_ms();
  nodes_.clear();
  recorded_ = 0;
  event(recorded_++).record(stream);
}

void CudaRunTimer::nodes_begin(const cuda::DeviceStream& stream) { event(recorded_++).record(stream); }

void CudaRunTimer::node_done(const cuda::DeviceStream& stream, const std::string& op_type, double host_ms) {
  event(recorded_++).record(stream);
  nodes_.push_back({.op_type = op_type, .gpu_ms = 0, .host_ms = host_ms});
}

void CudaRunTimer::end(const cuda::DeviceStream& stream) { event(recorded_++).record(stream); }

// After the run's synchronisation: every recorded event has completed.
void CudaRunTimer::finish(const cuda::DeviceStream& stream) {
  const size_t last = recorded_ - 1;  // begin (0), nodes_begin (1), nodes (2..last-1), end (last)
  // The gap after the first run holds the first step's own work outside it (optimizer state allocated,
  // kernels loaded lazily): gaps count from the third run on.
  const bool steady_gap = runs_finished_ >= 2;
  RunTiming run{.wall_ms = now_ms() - wall_start_,
                .uploads_ms = event(1).ms_since(event(0)),
                .downloads_ms = event(last).ms_since(event(last - 1)),
                .between_runs_ms = steady_gap ? event(0).ms_since(*previous_end_) : -1.0,
                .host_between_runs_ms = steady_gap ? wall_start_ - previous_finish_ : 0.0};
  for (size_t i = 0; i < nodes_.size(); ++i) nodes_[i].gpu_ms = event(i + 2).ms_since(event(i + 1));
  if (runs_finished_ > 0) profile_.add_run(nodes_, run);
  ++runs_finished_;
  previous_end_->record(stream);
  previous_finish_ = now_ms();
}

}  // namespace onnxtrain
