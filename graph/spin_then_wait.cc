#include "graph/spin_then_wait.h"

#include "graph/cpu_budget.h"
#include "graph/cpu_contention.h"

namespace onnxtrain {
namespace {

// /proc/stat counts in 10 ms ticks: 0.1 s reads to about 0.1 CPU. The first decision comes after 20 ms
// (a busy process beside reads 0.5-1.5); until then no waiter spins, as on a busy machine.
constexpr double kFirstSampleSeconds = 0.02, kSampleSeconds = 0.1;

struct SpinPolicy {
  std::mutex mutex;  // the sampler's; waiters that find it taken go on with the last decision
  CpuContention contention{affinity_cpus()};
  const int cpus = cpu_budget().cpus;
  // Others' busy CPUs at the last sample, in hundredths; "unknown" (as busy as can be) until the first.
  std::atomic<int> others_centi{1 << 20};
};

SpinPolicy& the_policy() {
  static SpinPolicy policy;
  return policy;
}

}  // namespace

void start_spin_wait_policy() { the_policy(); }

bool spin_waiting_pays(int parties) {
  SpinPolicy& policy = the_policy();
  if (parties > policy.cpus) return false;  // cheap, and true whatever the load
  std::unique_lock lock(policy.mutex, std::try_to_lock);
  if (lock.owns_lock()) {
    const bool decided = policy.others_centi.load(std::memory_order_relaxed) < (1 << 20);
    if (const std::optional<double> others =
            policy.contention.others_busy(decided ? kSampleSeconds : kFirstSampleSeconds))
      policy.others_centi.store(static_cast<int>(*others * 100.0), std::memory_order_relaxed);
  }
  // Half a CPU of slack: a kernel thread or a short-lived process now and then does not stop the polls.
  return parties * 100 + policy.others_centi.load(std::memory_order_relaxed) <= policy.cpus * 100 + 50;
}

}  // namespace onnxtrain
