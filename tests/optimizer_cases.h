// What the tests of the optimizer update rules on the host and on a GPU share (device_optimizer_test,
// cuda_optimizer_test): every optimizer and option as a case, a learning rate that changes step by step
// as a schedule's would, random vectors, and bitwise comparison.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "executor/optimizer.h"

namespace onnxtrain::optimizer_cases {

struct Case {
  std::string name;
  OptimizerConfig config;
};

inline std::vector<Case> cases() {
  using K = OptimizerKind;
  return {
      {"sgd", {.kind = K::sgd}},
      {"sgd_weight_decay", {.kind = K::sgd, .weight_decay = 0.01}},
      {"momentum", {.kind = K::sgd, .momentum = 0.9}},
      {"momentum_dampening_weight_decay", {.kind = K::sgd, .weight_decay = 1e-3, .momentum = 0.8, .dampening = 0.3}},
      {"nesterov_weight_decay", {.kind = K::sgd, .weight_decay = 5e-4, .momentum = 0.9, .nesterov = true}},
      {"adam", {.kind = K::adam}},
      {"adam_l2_amsgrad", {.kind = K::adam, .weight_decay = 0.01, .beta1 = 0.8, .beta2 = 0.99, .amsgrad = true}},
      {"adamw", {.kind = K::adamw, .weight_decay = 0.05}},
      {"adamw_amsgrad", {.kind = K::adamw, .weight_decay = 0.05, .eps = 1e-6, .amsgrad = true}},
      {"adam_onnx_post_decay",
       {.kind = K::adam, .weight_decay = 0.01, .convention = AdamConvention::onnx, .post_update_decay = 1e-3}},
      {"adagrad",
       {.kind = K::adagrad, .weight_decay = 0.01, .eps = 1e-10, .lr_decay = 0.01, .initial_accumulator_value = 0.1}},
  };
}

// The learning rate of step `k` (changing, as a schedule would).
inline double lr_at(int k) { return 0.05 / (1.0 + 0.3 * k); }

inline std::vector<float> uniform(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

// Bitwise equality, naming the first differing element (-0 aware, unlike ==). A NaN matches any NaN: its
// payload is the hardware's (x86 keeps the operand's quiet NaN 0x7fc00000 through a product, CUDA returns
// its canonical 0x7fffffff).
inline void expect_same_bits(std::span<const float> expected, std::span<const float> actual, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (std::isnan(expected[i]) && std::isnan(actual[i])) continue;
    ASSERT_EQ(std::bit_cast<uint32_t>(expected[i]), std::bit_cast<uint32_t>(actual[i]))
        << what << " element " << i << ": " << expected[i] << " vs " << actual[i];
  }
}

}  // namespace onnxtrain::optimizer_cases
