// torch.optim.Adam / AdamW (1.13, single-tensor loops), in torch's float32 operation order:
//   adamw: w = w·(1 − lr·wd)             adam: g = g + wd·w
//   m = m·β1 + (1 − β1)·g;  h = h·β2 + (1 − β2)·g·g;  amsgrad: hmax = max(hmax, h), used for h below
//   torch: t = step + 1;  denom = √h / √(1 − β2^t) + eps;  w = w + (−lr / (1 − β1^t))·m / denom
//   onnx:  T = step;  denom = √h + eps;  w = w + (−lr·√(1 − β2^T) / (1 − β1^T))·m / denom  (factor 1 at T = 0)
//   then w = (1 − post_update_decay)·w when that is set. Scalars are computed in double, as torch does.
#include <algorithm>
#include <cmath>

#include "executor/optimizer.h"

namespace onnxtrain::optim {

namespace {

// The factors of an update made when the parameter has had `count_before` updates:
// w += −step_scale·m / (√h / root_divisor + eps).
struct AdamFactors {
  double step_scale;    // multiplies m (lr included)
  double root_divisor;  // divides √h
};

AdamFactors adam_factors(const OptimizerConfig& c, int64_t count_before, double lr) {
  if (c.convention == AdamConvention::torch) {
    const double t = static_cast<double>(count_before + 1);
    const double bc1 = 1 - std::pow(c.beta1, t), bc2 = 1 - std::pow(c.beta2, t);
    return {lr / bc1, std::sqrt(bc2)};
  }
  if (count_before == 0) return {lr, 1.0};
  const double t = static_cast<double>(count_before);
  return {lr * std::sqrt(1 - std::pow(c.beta2, t)) / (1 - std::pow(c.beta1, t)), 1.0};
}

// The scalars of one update, in float as torch applies them.
struct AdamScalars {
  float decay;  // adamw: 1 − lr·wd, else 1
  float l2;     // adam: wd, else 0
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float neg_step;      // −step_scale
  float root_divisor;  // torch divides √h by √(1 − β2^t)
  float eps;
  float post;  // 1 − post_update_decay
};

template <bool kAmsgrad>
void adam_loop(const AdamScalars& k, size_t n, float* __restrict w, const float* __restrict g, float* __restrict m,
               float* __restrict h, float* __restrict hmax) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    const float wi = w[i] * k.decay;
    const float gi = g[i] + k.l2 * wi;
    m[i] = m[i] * k.beta1 + k.one_minus_beta1 * gi;
    h[i] = h[i] * k.beta2 + k.one_minus_beta2 * gi * gi;
    float root;
    if constexpr (kAmsgrad) {
      hmax[i] = std::max(hmax[i], h[i]);
      root = std::sqrt(hmax[i]);
    } else {
      root = std::sqrt(h[i]);
    }
    w[i] = (wi + k.neg_step * m[i] / (root / k.root_divisor + k.eps)) * k.post;
  }
}

}  // namespace

void adam_update(const OptimizerConfig& c, std::span<float> w, std::span<const float> g, ParamState& s, double lr) {
  const size_t n = w.size();
  float* m = state_tensor(s, "exp_avg", n).data();
  float* h = state_tensor(s, "exp_avg_sq", n).data();
  const bool decoupled = c.kind == OptimizerKind::adamw;
  const AdamFactors f = adam_factors(c, s.step, lr);
  const AdamScalars k{.decay = decoupled ? static_cast<float>(1.0 - lr * c.weight_decay) : 1.0f,
                      .l2 = decoupled ? 0.0f : static_cast<float>(c.weight_decay),
                      .beta1 = static_cast<float>(c.beta1),
                      .one_minus_beta1 = static_cast<float>(1.0 - c.beta1),
                      .beta2 = static_cast<float>(c.beta2),
                      .one_minus_beta2 = static_cast<float>(1.0 - c.beta2),
                      .neg_step = static_cast<float>(-f.step_scale),
                      .root_divisor = static_cast<float>(f.root_divisor),
                      .eps = static_cast<float>(c.eps),
                      .post = static_cast<float>(1.0 - c.post_update_decay)};
  if (c.amsgrad)
    adam_loop<true>(k, n, w.data(), g.data(), m, h, state_tensor(s, "max_exp_avg_sq", n).data());
  else
    adam_loop<false>(k, n, w.data(), g.data(), m, h, nullptr);
  ++s.step;
}

void adam_direction(const OptimizerConfig& c, const ParamState& s, std::span<const float> w, std::span<float> v) {
  const size_t n = v.size();
  std::span<const float> m = s.tensor("exp_avg");
  std::span<const float> h = s.tensor(c.amsgrad ? "max_exp_avg_sq" : "exp_avg_sq");
  const AdamFactors f = adam_factors(c, s.step - 1, 1.0);  // the factors of the last update, lr = 1
  const float scale = static_cast<float>(f.step_scale), root_divisor = static_cast<float>(f.root_divisor);
  const float eps = static_cast<float>(c.eps);
  const float wd = c.kind == OptimizerKind::adamw ? static_cast<float>(c.weight_decay) : 0.0f;
#pragma omp simd
  for (size_t i = 0; i < n; ++i) v[i] = scale * m[i] / (std::sqrt(h[i]) / root_divisor + eps) + wd * w[i];
}

}  // namespace onnxtrain::optim
