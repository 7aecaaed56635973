// A session prepared at one OpenMP thread count and run at another (the CLI lowers the count while other
// processes keep the CPUs busy, tools/train_common.cc) runs kernels made at the new count: oneDNN fixes a
// primitive's threads when it is created, so kernels kept from 2 threads would still run 2 under
// omp_set_num_threads(1). Seen from outside: the training steps at 1 thread take CPU time on the calling
// thread only, none on the OpenMP worker that the 2-thread steps used.
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "executor/trainer.h"
#include "frontend/data_loader.h"
#include "frontend/dataset.h"
#include "frontend/importer.h"

namespace onnxtrain {
namespace {

namespace fs = std::filesystem;

// User + system clock ticks of each thread of this process but the calling one, summed.
long other_threads_ticks() {
  const long self = static_cast<long>(::syscall(SYS_gettid));
  long ticks = 0;
  for (const auto& task : fs::directory_iterator("/proc/self/task")) {
    if (std::stol(task.path().filename().string()) == self) continue;
    std::ifstream in(task.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // after "pid (comm) "
    std::string skip;
    for (int i = 3; i < 14; ++i) fields >> skip;  // state .. cmajflt: fields 3 to 13
    long utime = 0, stime = 0;
    fields >> utime >> stime;
    ticks += utime + stime;
  }
  return ticks;
}

TEST(ThreadCountKernels, StepsAtOneThreadRunOnTheCallingThreadOnly) {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  if (policy != nullptr && (std::string(policy) == "active" || std::string(policy) == "ACTIVE"))
    GTEST_SKIP() << "OMP_WAIT_POLICY=active: an idle OpenMP worker spins, so its CPU time tells nothing";
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  ImportedModel model = import_model(std::string(ONNXTRAIN_SOURCE_DIR) + "/models/resnet_opset17.onnx");
  Dataset data = load_dataset("synthetic:3,32,32:10:32", {.normalize = Normalization::MeanStd, .seed = 3});
  TrainerOptions options;
  options.loss = parse_loss_spec("cross-entropy");
  options.schedule.base_lr = 0.01;
  Trainer trainer(model.graph, options);
  DataLoader loader(data, {.batch = 32, .shuffle = false, .prefetch = false});
  const Batch b = loader.next();
  trainer.train_step(b.x, b.y);  // the kernels made for 2 threads; the worker thread exists from here on
  const long worker_before = other_threads_ticks();
  timespec cpu_before{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_before);
  omp_set_num_threads(1);
  for (int step = 0; step < 15; ++step) trainer.train_step(b.x, b.y);
  timespec cpu_after{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_after);
  const long worker = other_threads_ticks() - worker_before;
  const double self_ticks = (static_cast<double>(cpu_after.tv_sec - cpu_before.tv_sec) +
                             1e-9 * static_cast<double>(cpu_after.tv_nsec - cpu_before.tv_nsec)) *
                            static_cast<double>(sysconf(_SC_CLK_TCK));
  ASSERT_GT(self_ticks, 20) << "too little work to tell";
  EXPECT_LT(static_cast<double>(worker), 0.1 * self_ticks)
      << "the worker thread ran " << worker << " ticks beside the caller's " << self_ticks;
  omp_set_num_threads(2);
  EXPECT_TRUE(std::isfinite(trainer.train_step(b.x, b.y)));  // back to the kept 2-thread kernels
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace onnxtrain
