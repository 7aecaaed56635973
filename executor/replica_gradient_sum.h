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
#pragma once

#include <span>
#include <vector>

namespace onnxtrain {

class ReplicaGradientSum {
 public:
  explicit ReplicaGradientSum(int replicas);

  // Replica `replica`'s gradients (the same tensors, in the same order, on every replica) and weight.
  // The spans stay valid, and the replica writes no more to them, until the step's second barrier.
  void publish(int replica, std::vector<std::span<float>> gradients, double weight);
  // Sums `replica`'s share of the elements; call after every replica has published.
  void sum_share(int replica);

 private:
  std::vector<std::vector<std::span<float>>> gradients_;  // by replica
  std::vector<double> weights_;
};

}  // namespace onnxtrain
