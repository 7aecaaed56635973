// ReplicaGradientSum (executor/replica_gradient_sum.h): R replica threads, each summing its share of the
// elements, give every replica exactly what weighing each gradient in place and the local Communicator's
// all-reduce give, whatever the tensor sizes (a share may be empty); and their sharded step
// (step_share with executor/sharded_optimizer_step.h) gives every replica's weights, and the first
// replica's optimizer state, exactly what the sum and then Optimizer::step give, step after step, for
// every optimizer. Labelled `threads`: it also runs under ThreadSanitizer.
#include "executor/replica_gradient_sum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include "executor/comm/local_comm.h"
#include "executor/optimizer.h"
#include "executor/sharded_optimizer_step.h"
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

// Row weights that are not floats (the products in double, rounded to float), that are (float products:
// the same bits), and both in one step; gradients with values whose weighed products are subnormal or
// near the float range's end.
TEST(ReplicaGradientSum, EqualsWeighingAndTheAllReduceBitForBit) {
  const int replicas = 3;
  const std::vector<size_t> sizes{1, 2, 4099, 10000};  // shares of 0 elements, and blocks that do not divide
  for (const std::vector<double>& weights : std::vector<std::vector<double>>{
           {3.0 / 7.0, 2.0 / 7.0, 2.0 / 7.0}, {0.5, 0.25, 0.25}, {0.5, 1.0 / 3.0, 1.0 / 6.0}}) {
    SCOPED_TRACE("row weights " + std::to_string(weights[0]) + ", " + std::to_string(weights[1]));
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<Tensors> mine(replicas), reference(replicas);
    for (int k = 0; k < replicas; ++k) {
      for (size_t n : sizes) {
        mine[k].emplace_back(n);
        for (float& v : mine[k].back()) v = normal(rng);
      }
      mine[k][3][5] = 1.17e-38f * static_cast<float>(k + 1);  // subnormal once weighed
      mine[k][3][6] = 3.1e38f;
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
}

TEST(ReplicaGradientSum, ReplicasWithDifferentTensorsAreAnError) {
  ReplicaGradientSum sum(2);
  Tensors a{std::vector<float>(4)}, b{std::vector<float>(5)};
  sum.publish(0, spans_of(a), 0.5);
  sum.publish(1, spans_of(b), 0.5);
  EXPECT_THROW(sum.sum_share(0), std::logic_error);
}

TEST(ReplicaGradientSum, StepWithoutPublishedWeightsIsAnError) {
  ReplicaGradientSum sum(2);
  Tensors a{std::vector<float>(4)}, b{std::vector<float>(4)};
  sum.publish(0, spans_of(a), 0.5);
  sum.publish(1, spans_of(b), 0.5);
  ShardedOptimizerStep step;
  EXPECT_THROW(sum.step_share(0, step), std::logic_error);
}

Tensors random_tensors(const std::vector<size_t>& sizes, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensors tensors;
  for (size_t n : sizes) {
    tensors.emplace_back(n);
    for (float& v : tensors.back()) v = normal(rng);
  }
  return tensors;
}

// Gradients given by their taps (a convolution's weight gradient without its zeros: TapLayout), by some
// replicas or all, give the sharded step exactly what their dense expansions give, step after step; the
// dense buffers of the tapped gradients are NaN and never read. Layouts: one tap in nine (ResNet's layer4),
// three taps in nine, every position a tap; the blocks of 2048 elements cut rows.
TEST(ReplicaGradientSum, TapsGiveTheDenseGradientsStepBitForBit) {
  const int replicas = 3, steps = 2;
  const std::vector<TapLayout> layouts{{.rows = 500, .plane = 9, .offsets = {4}},
                                       {.rows = 301, .plane = 9, .offsets = {1, 4, 7}},
                                       {.rows = 70, .plane = 4, .offsets = {0, 1, 2, 3}}};
  for (const std::vector<bool>& tapped : {std::vector<bool>{true, true, true}, std::vector<bool>{false, true, false}}) {
    for (const std::vector<double>& row_weights :
         {std::vector<double>{0.5, 0.25, 0.25}, std::vector<double>{3.0 / 7.0, 2.0 / 7.0, 2.0 / 7.0}}) {
      std::vector<size_t> sizes;
      std::vector<std::pair<std::string, size_t>> params;
      for (size_t t = 0; t < layouts.size(); ++t) {
        sizes.push_back(static_cast<size_t>(layouts[t].elements()));
        params.emplace_back("p" + std::to_string(t), sizes.back());
      }
      std::mt19937 rng(17);
      const Tensors initial = random_tensors(sizes, rng);
      Optimizer dense_optimizer({.kind = OptimizerKind::sgd, .momentum = 0.9}, LrSchedule{.base_lr = 0.05}),
          taps_optimizer({.kind = OptimizerKind::sgd, .momentum = 0.9}, LrSchedule{.base_lr = 0.05});
      std::vector<Tensors> dense_weights(replicas, initial), taps_weights(replicas, initial);
      const auto barrier = make_local_group(replicas, std::chrono::seconds(60));
      ReplicaGradientSum dense_sum(replicas), taps_sum(replicas);
      for (int s = 0; s < steps; ++s) {
        std::vector<Tensors> taps(replicas), dense(replicas), nan(replicas);
        for (int k = 0; k < replicas; ++k) {
          for (const TapLayout& layout : layouts) {
            std::normal_distribution<float> normal(0.0f, 1.0f);
            taps[k].emplace_back(static_cast<size_t>(layout.rows * layout.taps()));
            for (float& v : taps[k].back()) v = normal(rng);
            dense[k].emplace_back(static_cast<size_t>(layout.elements()));
            expand_taps(layout, taps[k].back().data(), dense[k].back().data(), false);
            nan[k].emplace_back(static_cast<size_t>(layout.elements()), std::nanf(""));
          }
        }
        const auto run = [&](ReplicaGradientSum& sum, Optimizer& optimizer, std::vector<Tensors>& weights,
                             bool with_taps) {
          ShardedOptimizerStep step;
          step.prepare(optimizer, params);
          on_replica_threads(replicas, [&](int k) {
            std::vector<ReplicaGradientSum::Taps> given;
            const bool mine = with_taps && tapped[static_cast<size_t>(k)];
            for (size_t t = 0; t < layouts.size(); ++t)
              given.push_back(mine ? ReplicaGradientSum::Taps{taps[k][t].data(), &layouts[t]}
                                   : ReplicaGradientSum::Taps{});
            sum.publish(k, spans_of(mine ? nan[k] : dense[k]), row_weights[k], spans_of(weights[k]), std::move(given));
            barrier[k]->barrier("published");
            sum.step_share(k, step);
            barrier[k]->barrier("stepped");
          });
          step.finish(optimizer);
        };
        run(dense_sum, dense_optimizer, dense_weights, false);
        run(taps_sum, taps_optimizer, taps_weights, true);
      }
      for (size_t t = 0; t < sizes.size(); ++t) {
        ASSERT_EQ(std::memcmp(taps_weights[0][t].data(), dense_weights[0][t].data(), sizes[t] * sizeof(float)), 0)
            << "tensor " << t;
        EXPECT_NE(std::memcmp(taps_weights[0][t].data(), initial[t].data(), sizes[t] * sizeof(float)), 0);
      }
    }
  }
}

// One replica of weight 1 (Trainer's own step), whose taps are read where they are when they are every
// element (a 1x1 convolution's weight gradient over one output pixel) and expanded block by block when
// zeros lie between them: the same weights and state as its dense gradients give, the dense buffers of the
// tapped gradients NaN and never read.
TEST(ReplicaGradientSum, OneReplicasTapsGiveItsDenseStepBitForBit) {
  const std::vector<TapLayout> layouts{{.rows = 5000, .plane = 1, .offsets = {0}},
                                       {.rows = 70, .plane = 4, .offsets = {0, 1, 2, 3}},
                                       {.rows = 500, .plane = 9, .offsets = {4}},
                                       {.rows = 300, .plane = 4, .offsets = {1, 2, 3}}};
  std::vector<std::pair<std::string, size_t>> params;
  for (size_t t = 0; t < layouts.size(); ++t)
    params.emplace_back("p" + std::to_string(t), static_cast<size_t>(layouts[t].elements()));
  std::mt19937 rng(23);
  std::vector<size_t> sizes;
  for (const auto& [name, n] : params) sizes.push_back(n);
  const Tensors initial = random_tensors(sizes, rng);
  Optimizer dense_optimizer({.kind = OptimizerKind::sgd, .momentum = 0.9}, LrSchedule{.base_lr = 0.05}),
      taps_optimizer({.kind = OptimizerKind::sgd, .momentum = 0.9}, LrSchedule{.base_lr = 0.05});
  Tensors dense_weights = initial, taps_weights = initial;
  for (int s = 0; s < 2; ++s) {
    Tensors taps, dense, nan;
    for (const TapLayout& layout : layouts) {
      std::normal_distribution<float> normal(0.0f, 1.0f);
      taps.emplace_back(static_cast<size_t>(layout.rows * layout.taps()));
      for (float& v : taps.back()) v = normal(rng);
      dense.emplace_back(static_cast<size_t>(layout.elements()));
      expand_taps(layout, taps.back().data(), dense.back().data(), false);
      nan.emplace_back(static_cast<size_t>(layout.elements()), std::nanf(""));
    }
    const auto run = [&](Optimizer& optimizer, Tensors& weights, bool with_taps) {
      ShardedOptimizerStep step;
      step.prepare(optimizer, params);
      ReplicaGradientSum sum(1);
      std::vector<ReplicaGradientSum::Taps> given;
      for (size_t t = 0; t < layouts.size(); ++t)
        given.push_back(with_taps ? ReplicaGradientSum::Taps{taps[t].data(), &layouts[t]} : ReplicaGradientSum::Taps{});
      sum.publish(0, spans_of(with_taps ? nan : dense), 1.0, spans_of(weights), std::move(given));
      sum.step_share(0, step, 0, 2);  // in two parts, as an OpenMP team of two would
      sum.step_share(0, step, 1, 2);
      step.finish(optimizer);
    };
    run(dense_optimizer, dense_weights, false);
    run(taps_optimizer, taps_weights, true);
  }
  for (size_t t = 0; t < sizes.size(); ++t) {
    ASSERT_EQ(std::memcmp(taps_weights[t].data(), dense_weights[t].data(), sizes[t] * sizeof(float)), 0)
        << "tensor " << t;
    EXPECT_NE(std::memcmp(taps_weights[t].data(), initial[t].data(), sizes[t] * sizeof(float)), 0);
  }
}

struct OptimizerCase {
  const char* name;
  OptimizerConfig config;
};

class ShardedStep : public ::testing::TestWithParam<OptimizerCase> {};

// Every replica count and kind of row weight the update's own pass sums (apply_sum): float weights (0.5
// each: dp:2 with an even batch; 11/32, 11/32, 10/32: dp:3 at batch 32; 0.25 each) in float products,
// others (3/7, 2/7, 2/7; 1/3 and 2/3) in double products; and nine replicas, more than the pass takes,
// summed block by block.
void sharded_step_equals_the_sum_then_the_step(const OptimizerConfig& config, const std::vector<double>& row_weights) {
  const int replicas = static_cast<int>(row_weights.size()), steps = 3;
  const std::vector<size_t> sizes{1, 2, 4099, 10000};
  const std::vector<std::string> names{"a", "b", "c", "d"};
  const LrSchedule schedule{.kind = LrScheduleKind::cosine, .base_lr = 0.05, .t_max = steps};
  std::mt19937 rng(11);
  const Tensors initial = random_tensors(sizes, rng);
  Optimizer reference_optimizer(config, schedule), first_optimizer(config, schedule);
  Tensors reference_weights = initial;
  std::vector<Tensors> weights(replicas, initial);
  const auto barrier = make_local_group(replicas, std::chrono::seconds(60));
  ReplicaGradientSum sum(replicas), reference_sum(replicas);
  for (int s = 0; s < steps; ++s) {
    std::vector<Tensors> grads(replicas), reference_grads(replicas);
    for (int k = 0; k < replicas; ++k) grads[k] = reference_grads[k] = random_tensors(sizes, rng);
    // The reference: the sum into every replica's gradients, then one whole optimizer step.
    on_replica_threads(replicas, [&](int k) {
      reference_sum.publish(k, spans_of(reference_grads[k]), row_weights[k]);
      barrier[k]->barrier("published");
      reference_sum.sum_share(k);
      barrier[k]->barrier("summed");
    });
    std::vector<ParamSlot> slots;
    for (size_t t = 0; t < sizes.size(); ++t) slots.push_back({names[t], reference_weights[t], reference_grads[0][t]});
    reference_optimizer.step(slots);

    ShardedOptimizerStep step;
    std::vector<std::pair<std::string, size_t>> params;
    for (size_t t = 0; t < sizes.size(); ++t) params.emplace_back(names[t], sizes[t]);
    step.prepare(first_optimizer, params);
    on_replica_threads(replicas, [&](int k) {
      sum.publish(k, spans_of(grads[k]), row_weights[k], spans_of(weights[k]));
      barrier[k]->barrier("published");
      sum.step_share(k, step);
      barrier[k]->barrier("stepped");
    });
    step.finish(first_optimizer);
  }
  for (int k = 0; k < replicas; ++k)
    for (size_t t = 0; t < sizes.size(); ++t)
      ASSERT_EQ(std::memcmp(weights[k][t].data(), reference_weights[t].data(), sizes[t] * sizeof(float)), 0)
          << "replica " << k << ", tensor " << t;
  EXPECT_NE(std::memcmp(weights[0][3].data(), initial[3].data(), sizes[3] * sizeof(float)), 0);
  EXPECT_EQ(first_optimizer.global_step(), steps);
  const std::map<std::string, Tensor> mine = first_optimizer.state_tensors(),
                                      reference = reference_optimizer.state_tensors();
  ASSERT_EQ(mine.size(), reference.size());
  for (const auto& [name, t] : reference) {
    ASSERT_TRUE(mine.count(name)) << name;
    ASSERT_EQ(mine.at(name).nbytes(), t.nbytes()) << name;
    EXPECT_EQ(std::memcmp(mine.at(name).raw(), t.raw(), t.nbytes()), 0) << name;
  }
}

TEST_P(ShardedStep, EqualsTheSumThenTheOptimizerStepBitForBit) {
  for (const std::vector<double>& row_weights : {std::vector<double>{3.0 / 7.0, 2.0 / 7.0, 2.0 / 7.0},
                                                 {0.5, 0.5},
                                                 {1.0 / 3.0, 2.0 / 3.0},
                                                 {11.0 / 32, 11.0 / 32, 10.0 / 32},
                                                 {0.25, 0.25, 0.25, 0.25},
                                                 std::vector<double>(9, 1.0 / 9)}) {
    SCOPED_TRACE(std::to_string(row_weights.size()) + " replicas, the first at " + std::to_string(row_weights[0]));
    sharded_step_equals_the_sum_then_the_step(GetParam().config, row_weights);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, ShardedStep,
    ::testing::Values(OptimizerCase{"sgd", {.kind = OptimizerKind::sgd, .weight_decay = 1e-3}},
                      OptimizerCase{"momentum", {.kind = OptimizerKind::sgd, .weight_decay = 5e-4, .momentum = 0.9}},
                      OptimizerCase{"nesterov", {.kind = OptimizerKind::sgd, .momentum = 0.9, .nesterov = true}},
                      OptimizerCase{"adam_amsgrad", {.kind = OptimizerKind::adam, .amsgrad = true}},
                      OptimizerCase{"adamw", {.kind = OptimizerKind::adamw, .weight_decay = 0.01}},
                      OptimizerCase{"adagrad",
                                    {.kind = OptimizerKind::adagrad, .eps = 1e-10, .initial_accumulator_value = 0.1}}),
    [](const ::testing::TestParamInfo<OptimizerCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace onnxtrain
