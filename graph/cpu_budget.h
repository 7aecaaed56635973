// How many CPUs this process may use: the CPUs of its affinity mask (sched_getaffinity: taskset, numactl,
// a container's cpuset), capped by its cgroup's CPU quota (cgroup v2 cpu.max, v1 cpu.cfs_quota_us over
// cpu.cfs_period_us: docker --cpus, Kubernetes limits), rounded up. The default thread count of every
// command (tools/onnxtrain.cc): libgomp counts the affinity mask but not the quota, and a quota of 1 CPU
// with 2 threads runs each thread half the time, the other waiting at every barrier.
//
//   CpuBudget budget = cpu_budget();
//   omp_set_num_threads(budget.cpus);   // unless OMP_NUM_THREADS is set
//   if (budget.quota_cpus > 0) ... budget.describe() ...
#pragma once

#include <string>

namespace onnxtrain {

struct CpuBudget {
  int affinity_cpus = 1;   // CPUs in the affinity mask (std::thread::hardware_concurrency if unreadable)
  double quota_cpus = 0;   // the cgroup quota in CPUs (2.5 = 250 ms per 100 ms period); 0: no quota
  std::string quota_file;  // where the quota was read, for messages
  int cpus = 1;            // min(affinity, ceil(quota)), at least 1

  // "2 CPUs (affinity)" or "1 CPU (cgroup quota 1.00 CPUs in /sys/fs/cgroup/cpu.max; affinity 2)".
  std::string describe() const;
};

// Reads the affinity mask and the quota of this process's cgroup under `cgroup_root` (the cgroup
// file system's mount; a test passes a directory of its own) as /proc/self/cgroup (or `proc_self_cgroup`)
// names it. Never throws: a file it cannot read or parse means no quota.
CpuBudget cpu_budget(const std::string& cgroup_root = "/sys/fs/cgroup",
                     const std::string& proc_self_cgroup = "/proc/self/cgroup");

}  // namespace onnxtrain
