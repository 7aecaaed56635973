// Trainer::train_step on the CPU when nothing looks at the whole gradient first (applies_optimizer_step_alone,
// no --accumulate): the backward writes each gradient into a buffer of the trainer's, or keeps only the taps
// of a convolution's weight gradient that is zero elsewhere (ResNet-18's layer4 at 32x32: 8 of 9 elements),
// and the optimizer steps from those in blocks, split over the OpenMP team, adding the taps into each block
// instead of writing and reading the zeros: the step DataParallelTrainer's replica threads take
// (ReplicaGradientSum::step_share, ShardedOptimizerStep), with one replica of weight 1, whose sums are
// the gradients' own bits. The weights, state and losses are those of Optimizer::step on the dense
// gradients, bit for bit (Trainer.KeptStepEqualsTheDenseStepBitForBit).
#include <omp.h>

#include <exception>

#include "executor/replica_gradient_sum.h"
#include "executor/sharded_optimizer_step.h"
#include "executor/trainer.h"

namespace onnxtrain {

Trainer::KeptForStep Trainer::kept_for_step(const std::map<std::string, KeptGradient>& gradients) {
  KeptForStep kept;
  for (const auto& [name, g] : gradients) {
    kept.gradients.push_back(g.dense);
    kept.taps.push_back(g.taps ? ReplicaGradientSum::Taps{g.taps->partial.data(), &g.taps->layout}
                               : ReplicaGradientSum::Taps{});
    kept.weights.push_back(parameter_values(name));
    kept.params.emplace_back(name, g.dense.size());
  }
  return kept;
}

float Trainer::train_step_kept(const DataInputs& x, const Tensor& y) {
  float loss = 0;
  KeptForStep kept = kept_for_step(forward_backward_kept(x, y, &loss));
  ShardedOptimizerStep step;
  step.prepare(optimizer_, kept.params);
  ReplicaGradientSum sum(1);
  sum.publish(0, std::move(kept.gradients), 1.0, std::move(kept.weights), std::move(kept.taps));
  std::exception_ptr error;
#pragma omp parallel
  {
    try {
      sum.step_share(0, step, omp_get_thread_num(), omp_get_num_threads());
    } catch (...) {
#pragma omp critical(onnxtrain_kept_step_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  step.finish(optimizer_);
  return loss;
}

}  // namespace onnxtrain
