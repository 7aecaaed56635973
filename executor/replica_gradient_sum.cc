#include "executor/replica_gradient_sum.h"

#include <algorithm>
#include <cstddef>

#include "graph/error.h"

namespace onnxtrain {

ReplicaGradientSum::ReplicaGradientSum(int replicas)
    : gradients_(static_cast<size_t>(replicas)), weights_(static_cast<size_t>(replicas), 1.0) {}

void ReplicaGradientSum::publish(int replica, std::vector<std::span<float>> gradients, double weight) {
  gradients_.at(static_cast<size_t>(replica)) = std::move(gradients);
  weights_.at(static_cast<size_t>(replica)) = weight;
}

void ReplicaGradientSum::sum_share(int replica) {
  const size_t r = gradients_.size(), me = static_cast<size_t>(replica);
  const std::vector<std::span<float>>& first = gradients_[0];
  for (size_t k = 1; k < r; ++k) {
    ONNXTRAIN_CHECK(gradients_[k].size() == first.size(), "replica gradient sum: replicas publish different tensors");
    for (size_t t = 0; t < first.size(); ++t)
      ONNXTRAIN_CHECK(gradients_[k][t].size() == first[t].size(), "replica gradient sum: tensor sizes differ");
  }
  // Blocks of a few KiB keep the running sum in L1 while each replica's block streams through once.
  constexpr size_t kBlock = 2048;
  float sum[kBlock];
  for (size_t t = 0; t < first.size(); ++t) {
    const size_t n = first[t].size(), begin = n * me / r, end = n * (me + 1) / r;
    for (size_t from = begin; from < end; from += kBlock) {
      const size_t count = std::min(kBlock, end - from);
      for (size_t k = 0; k < r; ++k) {
        const float* g = gradients_[k][t].data() + from;
        const double w = weights_[k];
        if (k == 0) {
          for (size_t i = 0; i < count; ++i) sum[i] = static_cast<float>(g[i] * w);
        } else {
          for (size_t i = 0; i < count; ++i) sum[i] += static_cast<float>(g[i] * w);
        }
      }
      for (size_t k = 0; k < r; ++k) std::copy_n(sum, count, gradients_[k][t].data() + from);
    }
  }
}

}  // namespace onnxtrain
