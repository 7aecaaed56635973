// SpecTrain's weight prediction, one predictor for every optimizer: the pipeline's spectrain stages
// (executor/pipeline/weight_memory.h, host loops or CUDA kernels) and the parameter server's pulls
// (--ps-predict) both build their per-element work here.
//
// Ŵ(s) = the weights after s applications of the optimizer's own update rule (optim::update_rule) to
// scratch copies of W and of the optimizer's state, all with one gradient estimate ĝ. Update k of the s
// (k = 0 … s−1) uses the learning rate the schedule gives the k-th coming step (lr_at(global_step + k):
// warm-up and decay included) and the parameter's update count + k (Adam's bias corrections, momentum's
// first-update coefficient, Adagrad's lr decay). Nesterov, weight decay, AMSGrad: whatever the rule does.
//
// The gradient estimate ĝ, "the gradient the coming updates will see", named by GradientEstimate:
//   momentum_buffer  sgd with momentum or nesterov, no weight decay. After t updates with a constant g
//                    the buffer is g·(μ^(t−1) + (1−d)·(1 − μ^(t−1))/(1 − μ)); ĝ = buffer / that sum.
//   first_moment     adam, adamw, amsgrad without an L2 term (adamw's decay is decoupled: m averages g
//                    alone). After t updates m = g·(1 − β1^t); ĝ = m / (1 − β1^t), Adam's own correction.
//   kept_average     everything else: plain sgd and adagrad (no state that averages g), and L2 weight
//                    decay (sgd+wd, adam+wd), which puts wd·W into the state. The predictor keeps its own
//                    average of the gradients it is shown (observe), avg ← β·avg + (1 − β)·g with β the
//                    optimizer's own smoothing constant (momentum, β1) or 0.9 when it has none, and
//                    ĝ = avg / (1 − β^t). It costs one float per weight.
// Each estimate equals g exactly when every gradient was g, so for a constant gradient Ŵ(s) is the weights
// s real updates reach (to float rounding): tests/weight_prediction_test.cc checks every optimizer, with
// schedules and warm-up, in the first steps and in steady state. Before the first update there is no
// estimate and Ŵ = W.
#pragma once

#include <cstdint>
#include <span>
#include <variant>

#include "executor/optimizer.h"
#include "kernels/weight_math.h"

namespace onnxtrain {

enum class GradientEstimate { momentum_buffer, first_moment, kept_average };
GradientEstimate gradient_estimate(const OptimizerConfig& c);
// β of the kept average (kept_average only).
double kept_average_beta(const OptimizerConfig& c);

using PredictionRule = std::variant<optimizer_math::PredictAhead<optimizer_math::SgdUpdate>,
                                    optimizer_math::PredictAhead<optimizer_math::SgdMomentumUpdate>,
                                    optimizer_math::PredictAhead<optimizer_math::SgdNesterovUpdate>,
                                    optimizer_math::PredictAhead<optimizer_math::AdamUpdate>,
                                    optimizer_math::PredictAhead<optimizer_math::AdagradUpdate>>;

// The work of predicting one parameter s updates ahead: `updates` is its update count (ParamState::step),
// `estimated_from` how many gradients its estimate has averaged (the count again for the state-derived
// estimates; the observations for kept_average). Both must be > 0. Throws Error when s exceeds
// optimizer_math::kMaxPredictedSteps.
PredictionRule prediction_rule(const Optimizer& optimizer, int64_t updates, int64_t estimated_from, int64_t s);

// Calls run(f, states...) with the rule's functor and the state arrays its update rule reads (taken from
// `states`, in Optimizer::state_names() order). f(out[i], w[i], estimate[i], states[i]...) predicts
// element i; the estimate array is `states[0]` for the state-derived estimates, the kept average otherwise.
template <typename Run>
void dispatch_prediction(const PredictionRule& rule, std::span<const float* const> states, Run&& run) {
  std::visit(
      [&](const auto& f) {
        using Rule = std::decay_t<decltype(f.rules[0])>;
        optim::call_with_state_arrays<Rule>(states, [&](const auto*... arrays) { run(f, arrays...); });
      },
      rule);
}

// The host loop: out[i] = Ŵ(s)[i] for n elements.
void predict_on_host(const PredictionRule& rule, std::span<const float* const> states, const float* estimate,
                     const float* w, float* out, size_t n);

}  // namespace onnxtrain
