// The gradient sum of R replica threads of one process (DataParallelTrainer without --bucket-mb), in
// parallel: every replica publishes its gradients and its row weight, and once all have (a barrier), each
// sums its own 1/R of every tensor's elements over all replicas and writes the sum into every replica's
// copy; a second barrier ends the step's exchange. Per element exactly the Communicator's all-reduce of
// weighed gradients: g·w rounded to float, added in replica order, so the result does not depend on R's
// split of the work or on thread timing. Against weighing each gradient in place and then one thread
// all-reducing them all, every gradient is read and written once instead of twice, by R threads instead
// of one (ResNet-18, 45 MB of gradients per replica on 2 cores).
//
//   ReplicaGradientSum sum(replicas);
//   // on replica k's thread:
//   sum.publish(k, spans_of(grads), rows_k / rows);  comm.barrier(...);  sum.sum_share(k);  comm.barrier(...);
//
// The sharded step (step_share) goes one pass further: each replica updates its share of the first
// replica's weights with the sums as it makes them (ShardedOptimizerStep: that replica's optimizer state
// is the only one), then copies the updated share into the other replicas' weights, unless they are the
// first replica's (DataParallelTrainer shares one copy among its replica threads). The gradients are
// left as they were. Per replica and step it reads its share of the R gradients and of the weights and
// state and writes the weights and the state once (R times the weights when each replica has its own),
// where sum_share and then R whole updates write the sums R times and read and write every copy of the
// weights and state.
//
//   sum.publish(k, spans_of(grads), rows_k / rows, spans_of(weights_k));  comm.barrier(...);
//   sum.step_share(k, step);  comm.barrier(...);   // step prepared before the first barrier
//
// A replica may give a gradient by its taps instead (kernels/tap_layout.h: a convolution's weight gradient
// that is zero but at some taps, as the kernel kept it: Trainer::forward_backward_kept): the sharded step
// then adds those and never reads, nor has the replica written, the zeros. Taps that are every element
// (a 1x1 convolution's weight gradient over one output pixel, MobileNetV2's last stages at 32x32) are read
// as the dense gradient they are, in place and vectorised, not scattered element by element. The sums are
// the same bits.
#pragma once

#include <span>
#include <vector>

#include "kernels/tap_layout.h"

namespace onnxtrain {

class ShardedOptimizerStep;

class ReplicaGradientSum {
 public:
  explicit ReplicaGradientSum(int replicas);

  // Replica `replica`'s gradients (the same tensors, in the same order, on every replica) and weight.
  // The spans stay valid, and the replica writes no more to them, until the step's second barrier.
  // With the sharded step, also its weights (the parameters of the gradients, in the same order).
  // A gradient given by its taps: `values` (layout->rows × layout->taps()) and where they go; null values:
  // the dense span holds the gradient.
  struct Taps {
    const float* values = nullptr;
    const TapLayout* layout = nullptr;
  };
  void publish(int replica, std::vector<std::span<float>> gradients, double weight,
               std::vector<std::span<float>> weights = {}, std::vector<Taps> taps = {});
  // Sums `replica`'s share of the elements; call after every replica has published (dense gradients only).
  void sum_share(int replica);
  // Sums `replica`'s share and steps it (`step` indexes the gradients' order): the first replica's weights
  // updated, then copied into the others'. Call after every replica has published its weights too.
  // `part` of `parts`: that piece of the share only (one replica's share split over an OpenMP team:
  // Trainer::train_step's own step); the pieces may run at once.
  void step_share(int replica, const ShardedOptimizerStep& step, int part = 0, int parts = 1);

 private:
  void check_published() const;

  std::vector<std::vector<std::span<float>>> gradients_;  // by replica
  std::vector<std::vector<std::span<float>>> weights_;    // by replica; empty without the sharded step
  std::vector<std::vector<Taps>> taps_;                   // by replica; empty: every gradient dense
  std::vector<double> row_weights_;
};

}  // namespace onnxtrain
