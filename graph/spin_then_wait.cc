#include "graph/spin_then_wait.h"

#include "graph/cpu_contention.h"

namespace onnxtrain {
namespace {

// /proc/stat counts in 10 ms ticks: 0.1 s reads to about 0.1 CPU. The first decision comes after 20 ms
// (a busy process beside reads 0.5-1.5); until then no waiter spins, as on a busy machine.
constexpr double kFirstSampleSeconds = 0.02, kSampleSeconds = 0.1;
constexpr double kBusyOthersCpus = 0.5;  // others' busy CPUs from which spinning stops

struct SpinPolicy {
  std::mutex mutex;  // the sampler's; waiters that find it taken go on with the last decision
  CpuContention contention{affinity_cpus()};
  const bool several_cpus = affinity_cpus().size() >= 2;
  std::atomic<bool> pays{false};
  bool decided = false;  // under `mutex`
};

SpinPolicy& the_policy() {
  static SpinPolicy policy;
  return policy;
}

}  // namespace

void start_spin_wait_policy() { the_policy(); }

bool spin_waiting_pays() {
  SpinPolicy& policy = the_policy();
  if (!policy.several_cpus) return false;
  std::unique_lock lock(policy.mutex, std::try_to_lock);
  if (lock.owns_lock())
    if (const std::optional<double> others =
            policy.contention.others_busy(policy.decided ? kSampleSeconds : kFirstSampleSeconds)) {
      policy.pays.store(*others < kBusyOthersCpus, std::memory_order_relaxed);
      policy.decided = true;
    }
  return policy.pays.load(std::memory_order_relaxed);
}

}  // namespace onnxtrain
