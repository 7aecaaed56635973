#include "graph/cpu_budget.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace onnxtrain {
namespace {

int affinity_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The cgroup path of this process for the v1 `cpu` controller ("4:cpu,cpuacct:/docker/abc") and for v2
// (the "0::/path" line); empty when it has none.
struct CgroupPaths {
  std::string v1_cpu, v2;
};
CgroupPaths read_cgroup_paths(const std::string& proc_self_cgroup) {
  CgroupPaths paths;
  std::ifstream in(proc_self_cgroup);
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) paths.v2 = path;
    std::stringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');)
      if (c == "cpu") paths.v1_cpu = path;
  }
  return paths;
}

// The quota in CPUs from a cgroup directory, v2's cpu.max ("max 100000" or "150000 100000") or v1's
// cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us; 0 for none or unreadable.
double quota_in(const std::string& dir, bool v2, std::string& file) {
  if (v2) {
    file = dir + "/cpu.max";
    std::istringstream in(first_line(file));
    std::string quota;
    double period = 0;
    if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
    try {
      return std::stod(quota) / period;
    } catch (const std::exception&) {
      return 0;
    }
  }
  file = dir + "/cpu.cfs_quota_us";
  try {
    const double quota = std::stod(first_line(file)), period = std::stod(first_line(dir + "/cpu.cfs_period_us"));
    return quota > 0 && period > 0 ? quota / period : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

// The tightest quota of the cgroup's directory and its ancestors up to the mount (a parent's limit binds
// its children too). Inside a container the path /proc/self/cgroup gives may be the host's: then the mount
// root itself is the container's cgroup.
double cgroup_quota(const std::string& mount, const std::string& path, bool v2, std::string& file) {
  std::vector<std::string> dirs;
  std::string p = path;
  while (!p.empty() && p != "/") {
    dirs.push_back(mount + p);
    p = p.substr(0, p.find_last_of('/'));
  }
  dirs.push_back(mount);
  double tightest = 0;
  for (const std::string& dir : dirs) {
    std::string f;
    const double q = quota_in(dir, v2, f);
    if (q > 0 && (tightest == 0 || q < tightest)) {
      tightest = q;
      file = f;
    }
  }
  return tightest;
}

}  // namespace

std::string CpuBudget::describe() const {
  std::string s = std::to_string(cpus) + (cpus == 1 ? " CPU" : " CPUs");
  if (quota_cpus <= 0) return s + " (affinity)";
  char quota[32];
  std::snprintf(quota, sizeof quota, "%.2f", quota_cpus);
  return s + " (cgroup quota " + quota + " CPUs in " + quota_file + "; affinity " + std::to_string(affinity_cpus) + ")";
}

CpuBudget cpu_budget(const std::string& cgroup_root, const std::string& proc_self_cgroup) {
  CpuBudget budget;
  budget.affinity_cpus = affinity_cpu_count();
  const CgroupPaths paths = read_cgroup_paths(proc_self_cgroup);
  // v1 mounts the cpu controller at cpu/ or cpu,cpuacct/; v2 is the root itself (or unified/ in hybrid mode).
  const std::vector<std::pair<std::string, bool>> places = {{cgroup_root + "/cpu", false},
                                                            {cgroup_root + "/cpu,cpuacct", false},
                                                            {cgroup_root, true},
                                                            {cgroup_root + "/unified", true}};
  for (const auto& [mount, v2] : places) {
    const std::string& path = v2 ? paths.v2 : paths.v1_cpu;
    if (!v2 && path.empty()) continue;
    std::string file;
    const double q = cgroup_quota(mount, path, v2, file);
    if (q > 0 && (budget.quota_cpus == 0 || q < budget.quota_cpus)) {
      budget.quota_cpus = q;
      budget.quota_file = file;
    }
  }
  budget.cpus = budget.affinity_cpus;
  if (budget.quota_cpus > 0)
    budget.cpus = std::max(1, std::min(budget.cpus, static_cast<int>(std::ceil(budget.quota_cpus - 1e-9))));
  return budget;
}

}  // namespace onnxtrain
