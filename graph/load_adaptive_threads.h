// The thread count of a run that shares its CPUs: the CPU budget (graph/cpu_budget.h) less the CPUs other
// processes keep busy (graph/cpu_contention.h), at least 1. With one busy process beside a 2-thread run on
// 2 cores, each barrier of the run waited for whichever of its threads the scheduler had put aside: the
// ResNet fixture ran at 0.26 of its idle speed on 2 threads, and at 0.6 on 1 (benchmarks/load_robustness.sh).
// A change needs two intervals in a row that ask for it, so one busy moment moves nothing.
//
//   LoadAdaptiveThreads adapt(budget.cpus);
//   if (auto others = contention.others_busy()) omp_set_num_threads(adapt.update(*others));
#pragma once

namespace onnxtrain {

class LoadAdaptiveThreads {
 public:
  explicit LoadAdaptiveThreads(int budget);

  // The thread count for the next interval, given others' busy CPUs over the last one.
  int update(double others_busy);
  int threads() const { return threads_; }
  int budget() const { return budget_; }

 private:
  int budget_;
  int threads_;
  int pending_ = 0;  // the count the last interval asked for when it differed from threads_; 0: none
};

}  // namespace onnxtrain
