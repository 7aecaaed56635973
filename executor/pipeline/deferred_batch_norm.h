// Deferred BatchNorm statistics (torchgpipe's DeferredBatchNorm, `onnxtrain train --deferred-bn`): a
// BatchNormalization node in training mode that runs on the M micro-batches of a mini-batch normalises each
// with its own statistics, as it must, but updates its running mean and variance once per mini-batch with
// the statistics of the whole mini-batch, as the one-device run does. Without it the running statistics
// take M momentum steps per mini-batch, each from a micro-batch.
//
//   DeferredBatchStats d;
//   for each micro-batch j: d.add(mean_out_j, var_out_j, old_mean, old_var, momentum, rows_j);
//   d.take(mean_out, var_out, old_mean, old_var, momentum);   // as the node's outputs on the whole batch
//   mean_update.apply(mean_out, old_mean, d_rows); ...          // RunningStatUpdate, with the unbiased N
//
// The node's outputs 1 and 2 are momentum·old + (1−momentum)·s with s the micro-batch's mean and
// population variance; `add` recovers s (old stays fixed within a mini-batch, since nothing updates it until
// `take`), sums rows·mean and rows·(variance + mean²) in double, and `take` gives the mini-batch's mean and
// population variance in the same output form.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace onnxtrain {

class DeferredBatchStats {
 public:
  void add(std::span<const float> mean_out, std::span<const float> var_out, std::span<const float> old_mean,
           std::span<const float> old_var, double momentum, int64_t rows);
  // Writes the outputs the node would have given for the whole mini-batch, then starts again. Nothing to
  // take (rows() == 0) is an error.
  void take(std::span<float> mean_out, std::span<float> var_out, std::span<const float> old_mean,
            std::span<const float> old_var, double momentum);
  int64_t rows() const { return rows_; }

 private:
  std::vector<double> sum_, sum_of_squares_;  // Σ rows·mean, Σ rows·(variance + mean²), per channel
  int64_t rows_ = 0;
};

}  // namespace onnxtrain
