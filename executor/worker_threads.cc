#include "executor/worker_threads.h"

#include <utility>

#include "graph/error.h"
#include "graph/host_resources.h"
#include "graph/spin_then_wait.h"

namespace onnxtrain {

WorkerThreads::WorkerThreads(int count) : parties_(count + 1), errors_(static_cast<size_t>(count)) {
  try {
    threads_.reserve(static_cast<size_t>(count));
    for (int k = 0; k < count; ++k) threads_.emplace_back([this, k] { loop(k); });
  } catch (const std::exception& e) {
    // A thread that cannot start (no memory for its stack under `ulimit -v`, a thread limit): the ones
    // already running are stopped and joined (a joinable std::thread destroyed would std::terminate), and
    // the failure is one line, "out of memory ...", instead of an abort.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      changes_.fetch_add(1, std::memory_order_release);
    }
    work_.notify_all();
    const int started = static_cast<int>(threads_.size());
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    if (auto message = out_of_resources_message(
            e, "starting worker thread " + std::to_string(started + 1) + " of " + std::to_string(count)))
      throw Error(*message);
    throw;
  }
}

WorkerThreads::~WorkerThreads() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return running_ == 0; });
    stopping_ = true;
    changes_.fetch_add(1, std::memory_order_release);
  }
  work_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerThreads::start(const std::function<void(int)>& task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ONNXTRAIN_CHECK(running_ == 0, "WorkerThreads::start while a task is still running: call wait() first");
    task_ = &task;
    running_ = size();
    for (std::exception_ptr& e : errors_) e = nullptr;
    ++generation_;
    changes_.fetch_add(1, std::memory_order_release);
  }
  work_.notify_all();
}

void WorkerThreads::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto all_done = [this] { return running_ == 0; };
  if (!spin_until_ready(lock, changes_, parties_, std::chrono::steady_clock::time_point::max(), all_done))
    done_.wait(lock, all_done);
  task_ = nullptr;
  for (const std::exception_ptr& e : errors_)
    if (e) std::rethrow_exception(e);
}

void WorkerThreads::loop(int k) {
  uint64_t seen = 0;
  while (true) {
    const std::function<void(int)>* task = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      const auto started = [&] { return stopping_ || generation_ != seen; };
      if (!spin_until_ready(lock, changes_, parties_, std::chrono::steady_clock::time_point::max(), started))
        work_.wait(lock, started);
      if (stopping_) return;
      seen = generation_;
      task = task_;
    }
    std::exception_ptr error;
    try {
      (*task)(k);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // Moved, not copied: a copy left here would be released after the unlock, possibly as the last
      // reference, destroying the exception on this thread while the caller reads it (the refcount's
      // atomics are in uninstrumented libstdc++, so ThreadSanitizer would report that as a race).
      errors_[static_cast<size_t>(k)] = std::move(error);
      if (--running_ == 0) {
        changes_.fetch_add(1, std::memory_order_release);
        done_.notify_all();
      }
    }
  }
}

}  // namespace onnxtrain
