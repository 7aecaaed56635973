#include "graph/load_adaptive_threads.h"

#include <algorithm>
#include <cmath>

namespace onnxtrain {

LoadAdaptiveThreads::LoadAdaptiveThreads(int budget) : budget_(std::max(1, budget)), threads_(budget_) {}

int LoadAdaptiveThreads::update(double others_busy) {
  const int wanted = std::clamp(budget_ - static_cast<int>(std::lround(others_busy)), 1, budget_);
  if (wanted == threads_) {
    pending_ = 0;
  } else if (wanted == pending_) {
    threads_ = wanted;
    pending_ = 0;
  } else {
    pending_ = wanted;
  }
  return threads_;
}

}  // namespace onnxtrain
