// spin_until_ready (graph/spin_then_wait.h): the poll before a condition variable's wait sees a change
// made during the spin or after it, returns false at the deadline when nothing changed, and always
// returns holding the lock. Whether it spins at all depends on the machine's load (spin_waiting_pays):
// every case here holds either way. Labelled `threads`: it also runs under ThreadSanitizer.
#include "graph/spin_then_wait.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "graph/cpu_budget.h"

namespace onnxtrain {
namespace {

using Clock = std::chrono::steady_clock;

struct Flag {
  std::mutex mutex;
  std::condition_variable cv;
  std::atomic<uint64_t> changes{0};
  int value = 0;  // under mutex

  void set(int v) {
    {
      std::lock_guard lock(mutex);
      value = v;
      changes.fetch_add(1, std::memory_order_release);
    }
    cv.notify_all();
  }
  // The waiters' pattern: the spin, then the condition variable. Returns whether `v` came.
  bool wait_for(int v, Clock::time_point deadline) {
    std::unique_lock lock(mutex);
    const auto ready = [&] { return value == v; };
    const bool came = spin_until_ready(lock, changes, 2, deadline, ready) || cv.wait_until(lock, deadline, ready);
    EXPECT_TRUE(lock.owns_lock());
    return came;
  }
};

TEST(SpinUntilReady, ReadyAlreadyReturnsAtOnceHoldingTheLock) {
  Flag f;
  f.value = 1;
  std::unique_lock lock(f.mutex);
  EXPECT_TRUE(
      spin_until_ready(lock, f.changes, 2, Clock::now() + std::chrono::seconds(10), [&] { return f.value == 1; }));
  EXPECT_TRUE(lock.owns_lock());
}

// 0 and 20 us fall within the spin (when it runs), 5 ms after it: the condition variable takes over.
TEST(SpinUntilReady, SeesAChangeMadeDuringTheSpinOrAfterIt) {
  for (auto delay : {std::chrono::microseconds(0), std::chrono::microseconds(20), std::chrono::microseconds(5000)}) {
    Flag f;
    std::thread setter([&] {
      std::this_thread::sleep_for(delay);
      f.set(1);
    });
    EXPECT_TRUE(f.wait_for(1, Clock::now() + std::chrono::seconds(30))) << delay.count() << " us";
    setter.join();
  }
}

// Changes that do not make the waiter ready (another value) do not end its wait.
TEST(SpinUntilReady, ChangesThatDoNotMakeItReadyKeepItWaiting) {
  Flag f;
  std::thread setter([&] {
    for (int v = 2; v < 200; ++v) f.set(v);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    f.set(1);
  });
  EXPECT_TRUE(f.wait_for(1, Clock::now() + std::chrono::seconds(30)));
  setter.join();
}

TEST(SpinUntilReady, FalseAtTheDeadlineWhenNothingComes) {
  Flag f;
  const auto deadline = Clock::now() + std::chrono::milliseconds(3);
  EXPECT_FALSE(f.wait_for(1, deadline));
  EXPECT_GE(Clock::now(), deadline);
  // A deadline already past: no spin, no wait.
  EXPECT_FALSE(f.wait_for(1, Clock::now() - std::chrono::seconds(1)));
}

// More threads waiting for each other than this process has CPUs: none of them polls, whatever the load
// (4 data-parallel replicas on 2 CPUs ran 0.8 times as fast with polling).
TEST(SpinWaitingPays, NotForMoreWaitersThanCpus) {
  const int cpus = cpu_budget().cpus;
  EXPECT_FALSE(spin_waiting_pays(cpus + 1));
  EXPECT_FALSE(spin_waiting_pays(4 * cpus));
  if (cpus == 1) EXPECT_FALSE(spin_waiting_pays(2)) << "one CPU: the thread waited for cannot run meanwhile";
}

}  // namespace
}  // namespace onnxtrain
