#include "executor/pipeline/deferred_batch_norm.h"

#include "graph/error.h"

namespace onnxtrain {

void DeferredBatchStats::add(std::span<const float> mean_out, std::span<const float> var_out,
                             std::span<const float> old_mean, std::span<const float> old_var, double momentum,
                             int64_t rows) {
  const size_t c = mean_out.size();
  ONNXTRAIN_CHECK(var_out.size() == c && old_mean.size() == c && old_var.size() == c,
                  "deferred BatchNorm statistics: the mean and variance have different channel counts");
  if (sum_.empty()) sum_.assign(c, 0.0), sum_of_squares_.assign(c, 0.0);
  ONNXTRAIN_CHECK(sum_.size() == c, "deferred BatchNorm statistics: the channel count changed");
  const double keep = 1.0 - momentum;  // > 0: the caller skips momentum 1 (nothing ever changes)
  for (size_t i = 0; i < c; ++i) {
    const double mean = (mean_out[i] - momentum * old_mean[i]) / keep;
    const double variance = (var_out[i] - momentum * old_var[i]) / keep;
    sum_[i] += static_cast<double>(rows) * mean;
    sum_of_squares_[i] += static_cast<double>(rows) * (variance + mean * mean);
  }
  rows_ += rows;
}

void DeferredBatchStats::take(std::span<float> mean_out, std::span<float> var_out, std::span<const float> old_mean,
                              std::span<const float> old_var, double momentum) {
  ONNXTRAIN_CHECK(rows_ > 0, "deferred BatchNorm statistics: no micro-batch was added");
  const double n = static_cast<double>(rows_);
  for (size_t i = 0; i < sum_.size(); ++i) {
    const double mean = sum_[i] / n;
    const double variance = std::max(0.0, sum_of_squares_[i] / n - mean * mean);
    mean_out[i] = static_cast<float>(momentum * old_mean[i] + (1.0 - momentum) * mean);
    var_out[i] = static_cast<float>(momentum * old_var[i] + (1.0 - momentum) * variance);
  }
  sum_.clear();
  sum_of_squares_.clear();
  rows_ = 0;
}

}  // namespace onnxtrain
