// Threads that live as long as their owner and run one task per worker each time they are started: the
// data-parallel replicas keep their threads across steps, and with them what a thread owns (its OpenMP
// pool, its cuBLAS and cuDNN handles on each device, which cost far more to create than a step takes).
//
//   WorkerThreads workers(3);
//   workers.start([&](int k) { ... });   // k = 0, 1, 2, each on its own worker, concurrently
//   ... the caller's own share ...
//   workers.wait();                        // all done; rethrows the first task exception (by k)
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace onnxtrain {

class WorkerThreads {
 public:
  explicit WorkerThreads(int count);
  ~WorkerThreads();  // waits for a started task, then joins
  WorkerThreads(const WorkerThreads&) = delete;
  WorkerThreads& operator=(const WorkerThreads&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }
  // Starts task(k) on worker k for every k (after wait() for the previous start). `task` must outlive wait().
  void start(const std::function<void(int)>& task);
  // Waits until every worker has finished the started task; rethrows the exception of the lowest k that
  // threw. Nothing when nothing was started.
  void wait();

 private:
  void loop(int k);

  std::mutex mutex_;
  std::condition_variable work_, done_;
  const std::function<void(int)>* task_ = nullptr;
  uint64_t generation_ = 0;           // incremented by every start: a worker runs each generation once
  std::atomic<uint64_t> changes_{0};  // bumped by a start and by the last worker done (spin_until_ready)
  const int parties_;                 // the workers and the caller, who wait for each other (set before any start)
  int running_ = 0;
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;  // last: started once everything above exists
};

}  // namespace onnxtrain
