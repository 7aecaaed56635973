#include "executor/weight_prediction.h"

#include <cmath>
#include <string>

#include "graph/error.h"

namespace onnxtrain {

GradientEstimate gradient_estimate(const OptimizerConfig& c) {
  switch (c.kind) {
    case OptimizerKind::sgd:
      return c.momentum != 0 && c.weight_decay == 0 ? GradientEstimate::momentum_buffer
                                                    : GradientEstimate::kept_average;
    case OptimizerKind::adam:
      return c.weight_decay == 0 ? GradientEstimate::first_moment : GradientEstimate::kept_average;
    case OptimizerKind::adamw:
      return GradientEstimate::first_moment;
    case OptimizerKind::adagrad:
      return GradientEstimate::kept_average;
  }
  return GradientEstimate::kept_average;
}

double kept_average_beta(const OptimizerConfig& c) {
  switch (c.kind) {
    case OptimizerKind::sgd:
      return c.momentum != 0 ? c.momentum : 0.9;
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
      return c.beta1;
    case OptimizerKind::adagrad:
      return 0.9;
  }
  return 0.9;
}

namespace {

// ĝ = source · scale: the factor that turns the estimate's source after t gradients into the gradient, were
// they all equal (see the header).
double estimate_scale(const OptimizerConfig& c, int64_t t) {
  const auto td = static_cast<double>(t);
  switch (gradient_estimate(c)) {
    case GradientEstimate::momentum_buffer: {
      // Σ = μ^(t−1) + (1−d)·(1 + μ + … + μ^(t−2)): the first update puts g in the buffer, each later one
      // multiplies by μ and adds (1−d)·g.
      const double mu = c.momentum, head = std::pow(mu, td - 1);
      const double tail = mu == 1 ? td - 1 : (1 - head) / (1 - mu);
      return 1 / (head + (1 - c.dampening) * tail);
    }
    case GradientEstimate::first_moment:
      return 1 / (1 - std::pow(c.beta1, td));
    case GradientEstimate::kept_average:
      return 1 / (1 - std::pow(kept_average_beta(c), td));
  }
  return 0;
}

}  // namespace

PredictionRule prediction_rule(const Optimizer& optimizer, int64_t updates, int64_t estimated_from, int64_t s) {
  ONNXTRAIN_CHECK(updates > 0 && estimated_from > 0, "weight prediction before the first update");
  if (s < 0 || s > optimizer_math::kMaxPredictedSteps)
    throw Error("SpecTrain predicts at most " + std::to_string(optimizer_math::kMaxPredictedSteps) +
                " updates ahead; this stage needs " + std::to_string(s) + " (use fewer stages, or pipedream)");
  const OptimizerConfig& c = optimizer.config();
  const auto rule_at = [&](int64_t k) {
    return optim::update_rule(c, updates + k, optimizer.schedule().lr_at(optimizer.global_step() + k));
  };
  return std::visit(
      [&](const auto& first) -> PredictionRule {
        using Rule = std::decay_t<decltype(first)>;
        optimizer_math::PredictAhead<Rule> f;
        f.steps = static_cast<int>(s);
        f.estimate_scale = static_cast<float>(estimate_scale(c, estimated_from));
        for (int64_t k = 0; k < s; ++k) f.rules[k] = std::get<Rule>(rule_at(k));
        return f;
      },
      rule_at(0));
}

void predict_on_host(const PredictionRule& rule, std::span<const float* const> states, const float* estimate,
                     const float* w, float* out, size_t n) {
  dispatch_prediction(rule, states, [&](const auto& f, const auto*... arrays) {
    for (size_t i = 0; i < n; ++i) f(out[i], w[i], estimate[i], arrays[i]...);
  });
}

}  // namespace onnxtrain
