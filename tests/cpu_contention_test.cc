// graph/cpu_contention.h: /proc/stat parsed for the watched CPUs only (a file laid out as Linux writes it),
// the arithmetic of others' share, and a real busy child process seen as about one busy CPU; and the thread
// count graph/load_adaptive_threads.h picks from others' share.
#include "graph/cpu_contention.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "graph/load_adaptive_threads.h"

namespace onnxtrain {
namespace {

namespace fs = std::filesystem;

TEST(CpuContention, BusySecondsAreTheWatchedCpusNonIdleTicks) {
  const fs::path file = fs::temp_directory_path() / ("cpu_contention_stat_" + std::to_string(getpid()));
  // user nice system idle iowait irq softirq steal guest guest_nice; the aggregate "cpu" line is skipped.
  std::ofstream(file) << "cpu  9000 0 9000 9000 0 0 0 0 0 0\n"
                         "cpu0 100 10 50 5000 70 1 2 3 0 0\n"
                         "cpu1 200 0 100 4000 0 0 0 7 0 0\n"
                         "cpu2 999 0 0 0 0 0 0 0 0 0\n"
                         "intr 123 4 5\n";
  const double tick = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  ASSERT_TRUE(busy_seconds(file.string(), {0, 1}).has_value());
  // cpu0: 100+10+50+1+2+3 (iowait is idle); cpu1: 200+100+7.
  EXPECT_NEAR(*busy_seconds(file.string(), {0, 1}), (166 + 307) * tick, 1e-9);
  EXPECT_NEAR(*busy_seconds(file.string(), {1}), 307 * tick, 1e-9);
  EXPECT_FALSE(busy_seconds(file.string(), {5}).has_value());  // names none of them
  EXPECT_FALSE(busy_seconds((file.string() + ".missing"), {0}).has_value());
  fs::remove(file);
}

TEST(CpuContention, OthersAreTheBusyTimeThisProcessDidNotUse) {
  // 2 s in which the CPUs were busy 3 s, 1 s of it this process's: others kept one CPU busy.
  EXPECT_DOUBLE_EQ(others_busy_between({10, 100, 5}, {12, 103, 6}), 1.0);
  EXPECT_DOUBLE_EQ(others_busy_between({10, 100, 5}, {12, 102, 7}), 0.0);
  // Tick rounding can make this process's time exceed the CPUs' busy time: never below 0.
  EXPECT_DOUBLE_EQ(others_busy_between({10, 100, 5}, {12, 101, 7}), 0.0);
}

TEST(CpuContention, ABusyChildProcessIsAboutOneCpu) {
  const std::vector<int> cpus = affinity_cpus();
  ASSERT_FALSE(cpus.empty());
  CpuContention contention(cpus);
  EXPECT_FALSE(contention.others_busy(10.0).has_value()) << "a value before 10 s";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    volatile uint64_t spin = 0;
    for (;;) spin += 1;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  const std::optional<double> others = contention.others_busy(1.0);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_TRUE(others.has_value());
  // The child alone is 1 CPU; other processes (a parallel test run) only add to it, up to all the CPUs.
  EXPECT_GE(*others, 0.6);
  EXPECT_LE(*others, static_cast<double>(cpus.size()) + 0.2);
}

TEST(LoadAdaptiveThreads, GivesOthersTheirCpusAfterTwoIntervalsAndTakesThemBack) {
  LoadAdaptiveThreads adapt(2);
  EXPECT_EQ(adapt.update(0.1), 2);
  EXPECT_EQ(adapt.update(0.9), 2) << "one busy interval moves nothing";
  EXPECT_EQ(adapt.update(0.2), 2);
  EXPECT_EQ(adapt.update(0.7), 2);
  EXPECT_EQ(adapt.update(1.1), 1) << "two in a row";
  EXPECT_EQ(adapt.update(1.0), 1);
  EXPECT_EQ(adapt.update(3.0), 1) << "never below one thread";
  EXPECT_EQ(adapt.update(0.3), 1);
  EXPECT_EQ(adapt.update(0.0), 2) << "the CPU is free again";
  LoadAdaptiveThreads wide(8);
  EXPECT_EQ(wide.update(2.6), 8);
  EXPECT_EQ(wide.update(3.4), 5);
  EXPECT_EQ(LoadAdaptiveThreads(0).threads(), 1);
}

}  // namespace
}  // namespace onnxtrain
