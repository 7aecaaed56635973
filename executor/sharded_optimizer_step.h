// One optimizer step applied in element ranges by several threads (ZeRO-1's sharded update, within one
// process): the replica threads of DataParallelTrainer each sum their share of every gradient's elements
// (executor/replica_gradient_sum.h) and update that share of one master copy of the weights and optimizer
// state at once, while the block of summed gradients is still in L1, instead of every replica writing
// the sums back and then running the whole update on its own copy. Per element it is the optimizer's own
// update (the functor optim::update_rule gives, which Optimizer::step runs), so the weights and state are
// bit for bit those of Optimizer::step on the summed gradients.
//
//   ShardedOptimizerStep step;
//   step.prepare(optimizer, {{"fc.weight", 6272}, {"fc.bias", 10}});   // one thread, before the shares
//   step.apply(0, begin, end, w + begin, g);                           // any thread, disjoint ranges
//   step.finish(optimizer);                                            // one thread, after every share
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "executor/optimizer.h"

namespace onnxtrain {

// Whether a row weight is exactly a float. Then g·w rounded to float is the float product g·w: the double
// product of two floats is exact, so both are the exact product rounded once; the float one takes twice
// the lanes and no conversions.
inline bool is_a_float(double w) { return static_cast<double>(static_cast<float>(w)) == w; }

class ShardedOptimizerStep {
 public:
  // The update rule of each parameter (the schedule's lr now, its own update count) and its state arrays,
  // created (zeros, Adagrad's initial sum) at its first update. Throws Error as Optimizer::update does
  // when a loaded state has another size.
  void prepare(Optimizer& optimizer, const std::vector<std::pair<std::string, size_t>>& params);
  // Updates elements [begin, end) of parameter `index`: w[0..end-begin) with the gradient g[0..end-begin).
  void apply(size_t index, size_t begin, size_t end, float* w, const float* g) const;
  // The same with g = Σ_k gradients[k]·row_weights[k], each product rounded to float, added in replica
  // order: R replicas' weighed gradients summed as ReplicaGradientSum sums them, in the pass that updates,
  // so the sum never goes through a buffer. gradients[k] holds parameter `index`'s elements [begin, end)
  // as w does. R from 1 to kMaxReplicasInPass (the loop is unrolled for each R).
  static constexpr size_t kMaxReplicasInPass = 8;
  void apply_sum(size_t index, size_t begin, size_t end, float* w, std::span<const float* const> gradients,
                 std::span<const double> row_weights) const;
  // Counts the step: each parameter's update count and the optimizer's global step.
  void finish(Optimizer& optimizer);

 private:
  struct Param {
    std::string name;
    optim::UpdateRule rule;
    std::vector<float*> states;  // in Optimizer::state_names() order
  };
  std::vector<Param> params_;
};

}  // namespace onnxtrain
