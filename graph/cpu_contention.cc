#include "graph/cpu_contention.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <utility>

namespace onnxtrain {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

std::optional<double> busy_seconds(const std::string& proc_stat, const std::vector<int>& cpus) {
  static const double ticks_per_s = static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::ifstream in(proc_stat);
  if (!in) return std::nullopt;
  double busy_ticks = 0;
  int found = 0;
  for (std::string line; std::getline(in, line);) {
    // "cpu3 user nice system idle iowait irq softirq steal guest guest_nice" (guest time is in user).
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || line[3] < '0' || line[3] > '9') continue;
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    if (!(fields >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq)) continue;
    fields >> steal;  // absent before Linux 2.6.11
    if (std::find(cpus.begin(), cpus.end(), cpu) == cpus.end()) continue;
    busy_ticks += user + nice + system + irq + softirq + steal;
    ++found;
  }
  if (found == 0) return std::nullopt;
  return busy_ticks / ticks_per_s;
}

double others_busy_between(const CpuSample& earlier, const CpuSample& later) {
  const double wall = later.wall_s - earlier.wall_s;
  if (wall <= 0) return 0;
  const double others = (later.busy_s - earlier.busy_s) - (later.self_s - earlier.self_s);
  return std::max(0.0, others / wall);
}

CpuContention::CpuContention(std::vector<int> cpus, std::string proc_stat)
    : cpus_(std::move(cpus)), proc_stat_(std::move(proc_stat)), last_(sample()) {}

std::optional<CpuSample> CpuContention::sample() const {
  const std::optional<double> busy = busy_seconds(proc_stat_, cpus_);
  if (!busy) return std::nullopt;
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return CpuSample{steady_seconds(), *busy, seconds(usage.ru_utime) + seconds(usage.ru_stime)};
}

std::optional<double> CpuContention::others_busy(double min_interval_s) {
  if (!last_) {
    last_ = sample();
    return std::nullopt;
  }
  if (steady_seconds() - last_->wall_s < min_interval_s) return std::nullopt;
  const std::optional<CpuSample> current = sample();
  if (!current) return std::nullopt;
  const double others = others_busy_between(*last_, *current);
  last_ = current;
  return others;
}

}  // namespace onnxtrain
