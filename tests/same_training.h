// Two trainers of one model, given the same steps, that must train alike bit for bit: a graph rewrite
// against the model's own nodes (graph/autodiff/batch_norm_relu.h, pool_before_relu.h).
//
//   TrainerOptions o = momentum_sgd();  TrainerOptions off = o;  off.fuse_batch_norm_relu = false;
//   expect_same_training(model, o, off, {4, 3, 6, 6}, 6);
#pragma once

#include <gtest/gtest.h>

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

// Four steps on uniform inputs of `x_sizes` (labels i % classes): the same losses, then the same bits in
// every trained tensor.
inline void expect_same_training(const Graph& model, const TrainerOptions& a, const TrainerOptions& b,
                                 const std::vector<int64_t>& x_sizes, int64_t classes) {
  Trainer first(copy_with_own_initializers(model), a), second(copy_with_own_initializers(model), b);
  Tensor y(DType::Int64, {x_sizes[0]});
  for (int64_t i = 0; i < x_sizes[0]; ++i) y.data<int64_t>()[static_cast<size_t>(i)] = i % classes;
  for (int step = 0; step < 4; ++step) {
    const Tensor x = uniform_tensor(x_sizes, 30 + static_cast<uint32_t>(step));
    EXPECT_EQ(first.train_step(x, y), second.train_step(x, y)) << "step " << step;
  }
  const std::map<std::string, Tensor> got = first.trained_initializers(), want = second.trained_initializers();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    const std::span<const float> g = got.at(name).data<float>(), w = t.data<float>();
    for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(g[i], w[i]) << name << "[" << i << "]";
  }
}

}  // namespace onnxtrain::testing_support
