// ReplicaGradientSum (executor/replica_gradient_sum.h): R replica threads, each summing its share of the
// elements, give every replica exactly what weighing each gradient in place and the local Communicator's
// all-reduce give, whatever the tensor sizes (a share may be empty). Labelled `threads`: it also runs
// under ThreadSanitizer.
#include "executor/replica_gradient_sum.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include "executor/comm/local_comm.h"
#include "graph/error.h"

namespace onnxtrain {
namespace {

using Tensors = std::vector<std::vector<float>>;  // one replica's gradients

std::vector<std::span<float>> spans_of(Tensors& tensors) {
  std::vector<std::span<float>> spans;
  for (std::vector<float>& t : tensors) spans.emplace_back(t);
  return spans;
}

// Runs `body(k)` on R threads at once and waits for them.
template <typename Body>
void on_replica_threads(int replicas, Body body) {
  std::vector<std::thread> threads;
  for (int k = 0; k < replicas; ++k) threads.emplace_back(body, k);
  for (std::thread& t : threads) t.join();
}

TEST(ReplicaGradientSum, EqualsWeighingAndTheAllReduceBitForBit) {
  const int replicas = 3;
  const std::vector<size_t> sizes{1, 2, 4099, 10000};  // shares of 0 elements, and blocks that do not divide
  const std::vector<double> weights{3.0 / 7.0, 2.0 / 7.0, 2.0 / 7.0};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<Tensors> mine(replicas), reference(replicas);
  for (int k = 0; k < replicas; ++k) {
    for (size_t n : sizes) {
      mine[k].emplace_back(n);
      for (float& v : mine[k].back()) v = normal(rng);
    }
    reference[k] = mine[k];
  }

  const auto group = make_local_group(replicas, std::chrono::seconds(60));
  on_replica_threads(replicas, [&](int k) {
    for (std::vector<float>& t : reference[k])
      for (float& v : t) v = static_cast<float>(v * weights[k]);
    group[k]->all_reduce_sum_each(spans_of(reference[k]), "reference all-reduce");
  });

  ReplicaGradientSum sum(replicas);
  const auto barrier = make_local_group(replicas, std::chrono::seconds(60));
  on_replica_threads(replicas, [&](int k) {
    sum.publish(k, spans_of(mine[k]), weights[k]);
    barrier[k]->barrier("published");
    sum.sum_share(k);
    barrier[k]->barrier("summed");
  });

  for (int k = 0; k < replicas; ++k) {
    for (size_t t = 0; t < sizes.size(); ++t) {
      ASSERT_EQ(std::memcmp(mine[k][t].data(), reference[k][t].data(), sizes[t] * sizeof(float)), 0)
          << "replica " << k << ", tensor " << t << " (" << sizes[t] << " elements)";
    }
  }
  EXPECT_NE(mine[0][3][0], 0.0f);
}

TEST(ReplicaGradientSum, ReplicasWithDifferentTensorsAreAnError) {
  ReplicaGradientSum sum(2);
  Tensors a{std::vector<float>(4)}, b{std::vector<float>(5)};
  sum.publish(0, spans_of(a), 0.5);
  sum.publish(1, spans_of(b), 0.5);
  EXPECT_THROW(sum.sum_share(0), std::logic_error);
}

}  // namespace
}  // namespace onnxtrain
