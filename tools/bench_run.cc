#include "tools/bench_run.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/error.h"

namespace onnxtrain::cli {
namespace fs = std::filesystem;

namespace {

std::string tail_of(const std::string& path, std::size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  return text.size() > bytes ? "..." + text.substr(text.size() - bytes) : text;
}

// Starts argv with stdout and stderr into `log`, OMP_NUM_THREADS = threads (0: as this process has it);
// returns the exit status and fills `usage`.
int run_child(const std::vector<std::string>& argv, const std::string& log, int threads, rusage& usage) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::string omp = std::to_string(threads);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("bench: cannot start a run: fork: ") + std::strerror(errno));
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
    }
    if (threads > 0) ::setenv("OMP_NUM_THREADS", omp.c_str(), 1);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) throw Error(std::string("bench: wait4: ") + std::strerror(errno));
  }
  return status;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

}  // namespace

std::string self_executable() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("bench: cannot find its own executable (/proc/self/exe): " + ec.message());
  return p.string();
}

MeasuredRun run_bench_once(const BenchRunSpec& spec, const StrategySpec& strategy, const std::string& tag) {
  const fs::path dir(spec.workdir);
  const std::string metrics = (dir / (tag + ".metrics.jsonl")).string(), log = (dir / (tag + ".log")).string();
  std::vector<std::string> argv = {self_executable(),
                                   "train",
                                   spec.model,
                                   "--data",
                                   spec.data,
                                   "--batch",
                                   std::to_string(spec.batch),
                                   "--epochs",
                                   "1",
                                   "--limit-batches",
                                   std::to_string(spec.warmup + spec.steps),
                                   "--validation",
                                   "0",
                                   "--test-data",
                                   "none",
                                   "--seed",
                                   std::to_string(spec.seed),
                                   "--log-every",
                                   "1000000",
                                   "--metrics",
                                   metrics,
                                   "-o",
                                   (dir / (tag + ".onnx")).string()};
  argv.insert(argv.end(), strategy.train_args.begin(), strategy.train_args.end());
  argv.insert(argv.end(), spec.extra_args.begin(), spec.extra_args.end());
  MeasuredRun r;
  if (spec.trace) {
    r.trace_path = (dir / (tag + ".trace.json")).string();
    argv.insert(argv.end(), {"--trace", r.trace_path});
  }

  rusage usage{};
  r.started_at = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const int status = run_child(argv, log, spec.threads, usage);
  r.peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // kilobytes on Linux
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    r.error = describe_status(status) + ": " + tail_of(log, 600);
    return r;
  }
  std::ifstream in(metrics);
  std::vector<double> times;  // when each step's loss arrived (asynchronous strategies: not in step order)
  double staleness_sum = 0;
  int64_t pushes = 0;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    if (j.contains("report")) r.report = j["report"];
    if (!j.contains("step") || !j.contains("time_s")) continue;
    const int64_t step = j["step"].get<int64_t>();
    if (step < 1 || step > spec.warmup + spec.steps) continue;
    times.push_back(j["time_s"].get<double>());
    r.losses.emplace_back(step, j["loss"].get<float>());
    if (j.contains("staleness")) staleness_sum += j["staleness"].get<double>(), ++pushes;
  }
  if (static_cast<int64_t>(r.losses.size()) != spec.warmup + spec.steps) {
    r.error = "the run reported " + std::to_string(r.losses.size()) + " of " +
              std::to_string(spec.warmup + spec.steps) + " steps in " + metrics;
    return r;
  }
  // The timed window: from the warmup-th step to finish until the last one.
  std::sort(times.begin(), times.end());
  std::sort(r.losses.begin(), r.losses.end());
  r.seconds = times.back() - (spec.warmup > 0 ? times[static_cast<std::size_t>(spec.warmup - 1)] : 0.0);
  r.samples_per_s = r.seconds > 0 ? static_cast<double>(spec.steps * spec.batch) / r.seconds : 0;
  r.final_loss = r.losses.back().second;
  if (pushes > 0) r.mean_staleness = staleness_sum / static_cast<double>(pushes);
  r.ok = true;
  return r;
}

}  // namespace onnxtrain::cli
