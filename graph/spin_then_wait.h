// A condition-variable wait that first polls for a short while with its lock released. The threads of one
// process hand work to each other (pipeline stages, data-parallel replicas, worker threads) every few
// hundred microseconds on small models; waking a thread blocked in the kernel took about 58 us a round
// trip on a 2-core VM (a futex wake-up and an idle vCPU brought back by the hypervisor), against 1.6 us
// polling (benchmarks/thread_handoff_bench.cc), and a Fashion-MNIST CNN step over two replicas waits
// three times in about 1 ms.
//
// The spin is bounded (kSpinBudget) and off where the threads that wait for each other and the other
// processes' busy threads outnumber the CPUs (spin_waiting_pays): there the thread being waited for needs
// the CPU the spinner holds, and an unbounded spin-wait collapses (libgomp's default spins for about 300k
// iterations before it sleeps).
//
//   // the notifier, after changing the guarded state under the lock:
//   changes.fetch_add(1, std::memory_order_release);
//   ... unlock; cv.notify_all();
//   // the waiter:
//   std::unique_lock lock(mutex);
//   const auto ready = [&] { return ...; };
//   spin_until_ready(lock, changes, parties, deadline, ready) || cv.wait_until(lock, deadline, ready);
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace onnxtrain {

// 1 ms covers a pipeline stage's wait for its neighbour's passes on small models (about 0.5 ms on the
// fixture CNN's gpipe), where each wake-up that the earlier 100 us left to the kernel put 30-70 us on the
// step's critical path; a longer wait spins 1 ms, then pays its one wake-up (under 7% of it).
inline constexpr std::chrono::microseconds kSpinBudget{1000};

// Whether a waiter spins at all: only while the `parties` threads that wait for each other (a local
// group's ranks, a WorkerThreads' workers and caller) and the CPUs other processes keep busy
// (CpuContention, sampled every 0.1 s by whichever waiter comes first) fit in the CPUs this process may
// use (cpu_budget), with half a CPU to spare. Otherwise a spinning thread takes the time the thread it
// waits for needs: beside one busy process, the CNN over 2 data-parallel replicas ran 0.8 times as fast
// with a 100 us spin as without, and 0.3 times with a spin that yielded (the yield hands a whole time
// slice to the busy one); 4 replicas on 2 CPUs ran 0.8 times as fast.
bool spin_waiting_pays(int parties);

// Takes that first sample now (a process's first waits otherwise do not spin for 20 ms).
void start_spin_wait_policy();

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `changes` (bumped under the lock by every change that could make `ready` true) for up to
// kSpinBudget, not past `deadline`, without holding `lock`, and checks ready() under it at each change;
// only when spin_waiting_pays(parties).
// Returns with `lock` held and ready()'s last value; on false the caller goes on to its condition
// variable's wait: `spin_until_ready(lock, changes, parties, deadline, ready) || cv.wait_until(lock, deadline,
// ready)`.
template <class Ready>
bool spin_until_ready(std::unique_lock<std::mutex>& lock, const std::atomic<uint64_t>& changes, int parties,
                      std::chrono::steady_clock::time_point deadline, Ready ready) {
  using Clock = std::chrono::steady_clock;
  if (ready()) return true;
  uint64_t seen = changes.load(std::memory_order_acquire);
  lock.unlock();
  if (!spin_waiting_pays(parties)) {  // asked without the lock: it reads /proc/stat now and then
    lock.lock();
    return ready();
  }
  const Clock::time_point spin_end = std::min(deadline, Clock::now() + kSpinBudget);
  for (uint32_t i = 1;; ++i) {
    if (changes.load(std::memory_order_acquire) != seen) {
      lock.lock();
      if (ready()) return true;
      seen = changes.load(std::memory_order_acquire);
      lock.unlock();
    }
    if (i % 64 == 0 && Clock::now() >= spin_end) break;  // a clock read costs about as much as 64 pauses
    cpu_relax();
  }
  lock.lock();
  return ready();
}

}  // namespace onnxtrain
