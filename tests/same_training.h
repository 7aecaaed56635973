// Two trainers of one model, given the same steps, that must train alike: bit for bit for a graph rewrite
// that only moves work (graph/autodiff/batch_norm_relu.h, pool_before_relu.h), within float32 rounding for
// one that computes otherwise (fused_matmul.h, fused_gelu.h).
//
//   TrainerOptions o = momentum_sgd();  TrainerOptions off = o;  off.fuse_batch_norm_relu = false;
//   expect_same_training(model, o, off, {4, 3, 6, 6}, 6);
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "executor/trainer.h"
#include "tests/graph_builder.h"

namespace onnxtrain::testing_support {

// Cross-entropy, momentum SGD at lr 0.1.
inline TrainerOptions momentum_sgd_options() {
  TrainerOptions o;
  o.loss = parse_loss_spec("cross-entropy");
  o.schedule.base_lr = 0.1;
  o.optimizer.momentum = 0.9;
  return o;
}

// `steps` steps on uniform inputs of `x_sizes` (labels i % classes): losses within `tolerance` (relative,
// at least absolute), then every trained tensor's elements within `tolerance`. For a rewrite exact only up
// to float32 rounding (a product summed in another order, oneDNN's polynomial erf).
inline void expect_close_training(const Graph& model, const TrainerOptions& a, const TrainerOptions& b,
                                  const std::vector<int64_t>& x_sizes, int64_t classes, int steps, double tolerance) {
  Trainer first(copy_with_own_initializers(model), a), second(copy_with_own_initializers(model), b);
  Tensor y(DType::Int64, {x_sizes[0]});
  for (int64_t i = 0; i < x_sizes[0]; ++i) y.data<int64_t>()[static_cast<size_t>(i)] = i % classes;
  for (int step = 0; step < steps; ++step) {
    const Tensor x = uniform_tensor(x_sizes, 30 + static_cast<uint32_t>(step));
    const double got = first.train_step(x, y), want = second.train_step(x, y);
    EXPECT_LE(std::abs(got - want), tolerance * std::max(1.0, std::abs(want))) << "step " << step;
  }
  const std::map<std::string, Tensor> got = first.trained_initializers(), want = second.trained_initializers();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    const std::span<const float> g = got.at(name).data<float>(), w = t.data<float>();
    for (size_t i = 0; i < w.size(); ++i) ASSERT_LE(std::abs(g[i] - w[i]), tolerance) << name << "[" << i << "]";
  }
}

// Four steps that must give the same losses and then the same bits in every trained tensor.
inline void expect_same_training(const Graph& model, const TrainerOptions& a, const TrainerOptions& b,
                                 const std::vector<int64_t>& x_sizes, int64_t classes) {
  expect_close_training(model, a, b, x_sizes, classes, 4, 0.0);
}

}  // namespace onnxtrain::testing_support
