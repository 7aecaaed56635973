// How busy other processes keep the CPUs this process may use. Over the interval between two samples:
// the busy time of those CPUs in /proc/stat (user, nice, system, irq, softirq, and steal: a vCPU the
// hypervisor gave to another guest) minus this process's own CPU time (getrusage), over the wall time,
// in CPUs. One busy process beside a 2-thread run reads about 1 (it takes what the run's threads leave).
//
//   CpuContention contention(affinity_cpus());
//   ... later, between training steps ...
//   if (auto others = contention.others_busy()) ... *others ...   // nullopt until 0.5 s have passed
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace onnxtrain {

// The CPU numbers of this process's affinity mask (sched_getaffinity), ascending.
std::vector<int> affinity_cpus();

struct CpuSample {
  double wall_s = 0;  // steady clock
  double busy_s = 0;  // busy seconds of the watched CPUs since boot (/proc/stat)
  double self_s = 0;  // this process's user + system seconds (getrusage)
};

// The busy seconds of `cpus` since boot from a /proc/stat-format file; nullopt when it cannot be read or
// names none of them.
std::optional<double> busy_seconds(const std::string& proc_stat, const std::vector<int>& cpus);

// Others' busy CPUs between two samples (at least 0).
double others_busy_between(const CpuSample& earlier, const CpuSample& later);

class CpuContention {
 public:
  explicit CpuContention(std::vector<int> cpus, std::string proc_stat = "/proc/stat");

  // Others' busy CPUs since the last call that returned a value (the constructor starts the first
  // interval); nullopt until `min_interval_s` has passed, or when /proc/stat cannot be read.
  std::optional<double> others_busy(double min_interval_s = 0.5);

 private:
  std::optional<CpuSample> sample() const;

  std::vector<int> cpus_;
  std::string proc_stat_;
  std::optional<CpuSample> last_;
};

}  // namespace onnxtrain
