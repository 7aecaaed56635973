// WorkerThreads (executor/worker_threads.h): every start runs the task once per worker, on the same
// long-lived threads each time, concurrently; wait() rethrows the lowest worker's exception, and the
// threads go on working after one. Labelled `threads`: it also runs under ThreadSanitizer.
#include "executor/worker_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "graph/error.h"
#include "tests/child_process.h"

namespace onnxtrain {
namespace {

TEST(WorkerThreads, EachStartRunsEveryWorkerOnceOnTheSameThreads) {
  WorkerThreads workers(3);
  std::vector<std::thread::id> first(3), second(3);
  std::vector<int> runs(3, 0);
  const std::function<void(int)> record_first = [&](int k) {
    first[k] = std::this_thread::get_id();
    ++runs[k];
  };
  workers.start(record_first);
  workers.wait();
  const std::function<void(int)> record_second = [&](int k) {
    second[k] = std::this_thread::get_id();
    ++runs[k];
  };
  workers.start(record_second);
  workers.wait();
  EXPECT_EQ(runs, (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(first, second) << "the same threads serve every start";
  EXPECT_EQ(std::set<std::thread::id>(first.begin(), first.end()).size(), 3u) << "one thread per worker";
  EXPECT_EQ(std::set<std::thread::id>(first.begin(), first.end()).count(std::this_thread::get_id()), 0u);
}

TEST(WorkerThreads, WorkersRunConcurrentlyWithTheCaller) {
  // Every worker waits until all of them and the caller have arrived: run one after another, this hangs.
  WorkerThreads workers(2);
  std::atomic<int> arrived{0};
  const std::function<void(int)> meet = [&](int) {
    ++arrived;
    while (arrived.load() < 3) std::this_thread::yield();
  };
  workers.start(meet);
  ++arrived;
  while (arrived.load() < 3) std::this_thread::yield();
  workers.wait();
  EXPECT_EQ(arrived.load(), 3);
}

TEST(WorkerThreads, WaitRethrowsTheLowestWorkersErrorAndTheThreadsGoOn) {
  WorkerThreads workers(3);
  const std::function<void(int)> fail = [](int k) {
    if (k >= 1) throw std::runtime_error("worker " + std::to_string(k));
  };
  workers.start(fail);
  try {
    workers.wait();
    FAIL() << "expected worker 1's error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "worker 1");
  }
  std::atomic<int> ran{0};
  const std::function<void(int)> count = [&](int) { ++ran; };
  workers.start(count);
  workers.wait();  // the previous errors are not reported again
  EXPECT_EQ(ran.load(), 3);
}

TEST(WorkerThreads, NoWorkersAndWaitWithoutStartAreFine) {
  WorkerThreads none(0);
  const std::function<void(int)> never = [](int) { FAIL() << "no worker to run it"; };
  none.start(never);
  none.wait();
  WorkerThreads idle(2);
  idle.wait();
}

// A thread that cannot start (its stack does not fit under `ulimit -v`): the ones started are joined and
// the constructor throws "out of memory ..." (was: the vector of joinable threads destroyed, std::terminate,
// "terminate called without an active exception" and an abort).
TEST(WorkerThreads, AThreadThatCannotStartIsAnOutOfMemoryError) {
  if (testing_support::kSanitized) GTEST_SKIP() << "sanitizer runtimes do not survive RLIMIT_AS";
  const testing_support::ChildResult r = testing_support::run_in_child([] {
    testing_support::limit_address_space_growth(uint64_t{200} << 20);  // 8 MiB stacks: about 25 threads
    try {
      WorkerThreads workers(1000);
      return std::string("no error");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  });
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.message.rfind("out of memory starting worker thread ", 0), 0u) << r.message;
  EXPECT_NE(r.message.find(" of 1000 (cannot start a thread: "), std::string::npos) << r.message;
}

}  // namespace
}  // namespace onnxtrain
