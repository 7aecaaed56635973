// SpecTrain's weight predictor (executor/weight_prediction.h), through the function the pipeline's
// spectrain stages call (WeightMemory::predict, host memory) and the parameter server's pulls:
// - for a constant gradient, Ŵ(s) is the weights s real updates reach, for every optimizer (sgd, sgd+wd,
//   momentum, dampening, nesterov, adam, adam+L2, adamw, amsgrad, adagrad with lr decay), s = 1, 2, 3,
//   predicted right after the first update (the transients: momentum's and Adam's bias corrections) and in
//   steady state, under a warm-up + cosine schedule (the lr of each coming update differs);
// - the estimate each optimizer uses and the memory it costs;
// - no estimate before the first update; s beyond the limit is refused.
#include "executor/weight_prediction.h"

#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "executor/pipeline/weight_memory.h"
#include "graph/error.h"

namespace onnxtrain {
namespace {

using K = OptimizerKind;

struct Case {
  std::string name;
  OptimizerConfig config;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> optimizers() {
  return {
      {"sgd", {.kind = K::sgd}},
      {"sgd_weight_decay", {.kind = K::sgd, .weight_decay = 0.05}},
      {"momentum", {.kind = K::sgd, .momentum = 0.9}},
      {"momentum_dampening", {.kind = K::sgd, .momentum = 0.8, .dampening = 0.3}},
      {"momentum_weight_decay", {.kind = K::sgd, .weight_decay = 0.05, .momentum = 0.9}},
      {"nesterov", {.kind = K::sgd, .momentum = 0.9, .nesterov = true}},
      {"adam", {.kind = K::adam}},
      {"adam_l2", {.kind = K::adam, .weight_decay = 0.05}},
      {"adamw", {.kind = K::adamw, .weight_decay = 0.05}},
      {"amsgrad", {.kind = K::adam, .amsgrad = true}},
      {"adagrad", {.kind = K::adagrad, .eps = 1e-10, .lr_decay = 0.01}},
  };
}

// Warm-up over 4 updates, then a cosine decay: each of the coming updates has its own lr.
LrSchedule warmup_cosine(const OptimizerConfig& c) {
  const double lr = c.kind == K::sgd ? 0.05 : 0.01;
  return {.kind = LrScheduleKind::cosine, .base_lr = lr, .t_max = 60, .warmup_steps = 4};
}

const std::vector<float> kStart = {1.0f, -2.0f, 0.5f, 0.25f, -0.75f};
const std::vector<float> kGradient = {0.3f, -0.1f, 2.0f, -0.02f, 0.7f};

class ConstantGradient {
 public:
  explicit ConstantGradient(const OptimizerConfig& c) : optimizer_(c, warmup_cosine(c)), w_(kStart) {
    memory_.enable_prediction(optimizer_);
  }
  void step() {
    const DeviceParamSlot slot{
        .name = "w", .value = w_.data(), .grad = kGradient.data(), .numel = static_cast<int64_t>(w_.size())};
    memory_.step(optimizer_, {&slot, 1});
  }
  std::vector<float> predict(int64_t s) {
    std::vector<float> out(w_.size());
    memory_.predict(optimizer_, "w", out.data(), w_.data(), w_.size(), s);
    return out;
  }
  const std::vector<float>& weights() const { return w_; }
  const WeightMemory& memory() const { return memory_; }

 private:
  Optimizer optimizer_;
  WeightMemory memory_;
  std::vector<float> w_;
};

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

class PredictionIsExact : public ::testing::TestWithParam<Case> {};

TEST_P(PredictionIsExact, ForAConstantGradientInTheFirstStepsAndInSteadyState) {
  const Case& c = GetParam();
  for (int warm : {1, 2, 30}) {  // after the first update, the second, and in steady state
    for (int64_t s : {1, 2, 3}) {
      ConstantGradient run(c.config);
      for (int t = 0; t < warm; ++t) run.step();
      const std::vector<float> now = run.weights();
      const std::vector<float> predicted = run.predict(s);
      for (int64_t k = 0; k < s; ++k) run.step();
      const double moved = max_abs_difference(now, run.weights());
      ASSERT_GT(moved, 1e-4) << "the weights must move for the check to mean something";
      // Float rounding of the estimate (a few ulps of g) and of s updates: far below the motion.
      EXPECT_LE(max_abs_difference(predicted, run.weights()), 2e-5 * moved + 1e-7)
          << c.name << ", s = " << s << ", after " << warm << " updates (moved " << moved << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryOptimizer, PredictionIsExact, ::testing::ValuesIn(optimizers()),
                         [](const auto& info) { return info.param.name; });

TEST(WeightPrediction, EachOptimizerUsesTheEstimateItsStateAllows) {
  EXPECT_EQ(gradient_estimate({.kind = K::sgd, .momentum = 0.9}), GradientEstimate::momentum_buffer);
  EXPECT_EQ(gradient_estimate({.kind = K::sgd, .momentum = 0.9, .nesterov = true}), GradientEstimate::momentum_buffer);
  EXPECT_EQ(gradient_estimate({.kind = K::adam}), GradientEstimate::first_moment);
  EXPECT_EQ(gradient_estimate({.kind = K::adamw, .weight_decay = 0.1}), GradientEstimate::first_moment);
  // No state that averages the gradient alone: the predictor keeps its own average, one float per weight.
  for (const OptimizerConfig& c :
       {OptimizerConfig{.kind = K::sgd}, OptimizerConfig{.kind = K::sgd, .weight_decay = 0.1, .momentum = 0.9},
        OptimizerConfig{.kind = K::adam, .weight_decay = 0.1}, OptimizerConfig{.kind = K::adagrad}}) {
    EXPECT_EQ(gradient_estimate(c), GradientEstimate::kept_average);
    ConstantGradient run(c);
    EXPECT_EQ(run.memory().prediction_bytes(), 0);
    run.step();
    EXPECT_EQ(run.memory().prediction_bytes(), static_cast<int64_t>(kStart.size() * sizeof(float)));
  }
  ConstantGradient momentum({.kind = K::sgd, .momentum = 0.9});
  momentum.step();
  EXPECT_EQ(momentum.memory().prediction_bytes(), 0);
}

TEST(WeightPrediction, BeforeTheFirstUpdateOrForZeroStepsIsTheWeights) {
  for (const Case& c : optimizers()) {
    ConstantGradient run(c.config);
    EXPECT_EQ(run.predict(2), kStart) << c.name;
    run.step();
    EXPECT_EQ(run.predict(0), run.weights()) << c.name;
    EXPECT_NE(run.predict(1), run.weights()) << c.name << ": one update made, a prediction is expected";
  }
}

TEST(WeightPrediction, RefusesMoreStepsThanItCanHold) {
  ConstantGradient run({.kind = K::sgd, .momentum = 0.9});
  run.step();
  EXPECT_NO_THROW(run.predict(optimizer_math::kMaxPredictedSteps));
  try {
    run.predict(optimizer_math::kMaxPredictedSteps + 1);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 32 updates ahead"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace onnxtrain
