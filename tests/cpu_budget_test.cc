// The default thread count (graph/cpu_budget.h): the affinity mask capped by the cgroup's CPU quota, read
// from cgroup file systems laid out in a scratch directory as v1, v2 and container mounts show them; and
// `onnxtrain train` under taskset, which must run as many threads as the mask has CPUs.
#include "graph/cpu_budget.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "graph/cpu_contention.h"
#include "tests/cli_run.h"

namespace onnxtrain {
namespace {

namespace fs = std::filesystem;

class CpuBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("cpu_budget_test_" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    affinity_ = CPU_COUNT(&set);
  }
  void TearDown() override { fs::remove_all(root_); }

  void write(const std::string& relative, const std::string& text) {
    const fs::path p = root_ / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  CpuBudget budget(const std::string& self_cgroup) {
    write("self_cgroup", self_cgroup);
    return cpu_budget((root_ / "fs").string(), (root_ / "self_cgroup").string());
  }

  fs::path root_;
  int affinity_ = 0;
};

TEST_F(CpuBudgetTest, NoQuotaIsTheAffinityMask) {
  const CpuBudget b = budget("0::/");
  EXPECT_EQ(b.quota_cpus, 0);
  EXPECT_EQ(b.affinity_cpus, affinity_);
  EXPECT_EQ(b.cpus, affinity_);
  EXPECT_EQ(b.describe(), std::to_string(affinity_) + (affinity_ == 1 ? " CPU" : " CPUs") + " (affinity)");
}

TEST_F(CpuBudgetTest, CgroupV2QuotaIsRoundedUpAndCapsTheMask) {
  write("fs/cpu.max", "max 100000");  // the root sets none
  write("fs/jobs/cpu.max", "50000 100000");
  write("fs/jobs/run7/cpu.max", "max 100000");  // a parent's quota binds its children
  const CpuBudget b = budget("0::/jobs/run7");
  EXPECT_DOUBLE_EQ(b.quota_cpus, 0.5);
  EXPECT_EQ(b.cpus, 1);
  EXPECT_NE(b.describe().find("cgroup quota 0.50 CPUs in " + (root_ / "fs/jobs/cpu.max").string()), std::string::npos)
      << b.describe();
}

TEST_F(CpuBudgetTest, CgroupV1QuotaOverPeriod) {
  write("fs/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "150000");
  write("fs/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000");
  const CpuBudget b = budget("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/");
  EXPECT_DOUBLE_EQ(b.quota_cpus, 1.5);
  EXPECT_EQ(b.cpus, std::min(affinity_, 2));
}

TEST_F(CpuBudgetTest, InsideAContainerTheMountRootIsItsOwnCgroup) {
  // /proc/self/cgroup names the host's path, which the container's mount does not have.
  write("fs/cpu.max", "100000 100000");
  const CpuBudget b = budget("0::/kubepods/pod1/container2");
  EXPECT_DOUBLE_EQ(b.quota_cpus, 1.0);
  EXPECT_EQ(b.cpus, 1);
}

TEST_F(CpuBudgetTest, UnreadableOrMalformedFilesMeanNoQuota) {
  write("fs/cpu.max", "lots 0");
  write("fs/cpu/cpu.cfs_quota_us", "-1");
  write("fs/cpu/cpu.cfs_period_us", "100000");
  const CpuBudget b = budget("garbage line\n3:cpu:/\n0::/");
  EXPECT_EQ(b.quota_cpus, 0);
  EXPECT_EQ(b.cpus, affinity_);
  EXPECT_EQ(budget("").cpus, affinity_);  // no /proc/self/cgroup lines at all
}

TEST(CpuBudgetCli, TrainRunsAsManyThreadsAsTheAffinityMaskHasCpus) {
  const std::string train =
      std::string("train ") + ONNXTRAIN_SOURCE_DIR +
      "/models/cnn_opset17.onnx --data synthetic:1,28,28:10:64 --batch 16 --limit-batches 1 "
      "--test-data none -o " +
      (fs::temp_directory_path() / ("cpu_budget_cli_" + std::to_string(getpid()) + ".onnx")).string();
  // `env -u` so that the test's own OMP_NUM_THREADS (if any) does not decide; taskset gives a 1-CPU mask.
  const auto r = testing_support::run_cli_prefixed("env -u OMP_NUM_THREADS taskset -c 0", train);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("threads: 1 (1 CPU (affinity))"), std::string::npos) << r.output;
  const auto env = testing_support::run_cli_prefixed("env OMP_NUM_THREADS=3 taskset -c 0", train);
  EXPECT_NE(env.output.find("threads: 3 (OMP_NUM_THREADS=3)"), std::string::npos) << env.output;
  fs::remove(fs::temp_directory_path() / ("cpu_budget_cli_" + std::to_string(getpid()) + ".onnx"));
}

// Beside a process that keeps one of its two CPUs busy, a run whose thread count OMP_NUM_THREADS does not fix
// drops to one thread (graph/load_adaptive_threads.h) and says so; with OMP_NUM_THREADS set it keeps two.
TEST(CpuBudgetCli, TrainGivesABusyCpuBackUnlessOmpNumThreadsIsSet) {
  const std::vector<int> cpus = affinity_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs in the affinity mask; this process may use 1";
  const pid_t busy = fork();
  ASSERT_GE(busy, 0);
  if (busy == 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[1], &one);
    sched_setaffinity(0, sizeof(one), &one);
    volatile uint64_t spin = 0;
    for (;;) spin += 1;
  }
  const std::string out =
      (fs::temp_directory_path() / ("cpu_budget_busy_" + std::to_string(getpid()) + ".onnx")).string();
  // 400 steps: a few seconds, of which the run needs two half-second intervals to see the busy CPU.
  const std::string train = std::string("train ") + ONNXTRAIN_SOURCE_DIR +
                            "/models/cnn_opset17.onnx --data synthetic:1,28,28:10:25600 --batch 64 --limit-batches 400 "
                            "--test-data none --validation 0 -o " +
                            out;
  const std::string mask = " taskset -c " + std::to_string(cpus[0]) + "," + std::to_string(cpus[1]);
  const auto adaptive = testing_support::run_cli_prefixed("env -u OMP_NUM_THREADS" + mask, train);
  const auto fixed = testing_support::run_cli_prefixed("env OMP_NUM_THREADS=2" + mask, train);
  kill(busy, SIGKILL);
  waitpid(busy, nullptr, 0);
  fs::remove(out);
  ASSERT_EQ(adaptive.exit_code, 0) << adaptive.output;
  EXPECT_NE(adaptive.output.find("threads: 1 of 2 (other processes keep"), std::string::npos) << adaptive.output;
  ASSERT_EQ(fixed.exit_code, 0) << fixed.output;
  EXPECT_NE(fixed.output.find("threads: 2 (OMP_NUM_THREADS=2)"), std::string::npos) << fixed.output;
  EXPECT_EQ(fixed.output.find("other processes keep"), std::string::npos) << fixed.output;
}

}  // namespace
}  // namespace onnxtrain
