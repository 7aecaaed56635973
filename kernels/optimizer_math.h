// The per-element optimizer updates, written once for every backend: small functors holding the scalars
// of one update (computed once per step on the host, in double as torch does, then rounded to float) whose
// operator() updates one element of a parameter and its state. executor/optim/*.cc run them in their
// `#pragma omp simd` loops; kernels/cuda/optimizer_update.cu instantiates the same functors in grid-stride
// kernels (compiled with --fmad=false), so both produce the same bits. Each operator() keeps the float
// operation order of torch.optim 1.13's single-tensor loops (documented at the top of each executor file):
// reordering or fusing any of it changes results and breaks the byte-identical trainer comparisons.
//
//   const optimizer_math::SgdMomentumUpdate f = optimizer_math::sgd_momentum_update(lr, wd, 0.9, 0.0, step);
//   for (i...) f(w[i], g[i], buf[i]);
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/elementwise_derivatives.h"  // ONNXTRAIN_HOST_DEVICE

namespace onnxtrain::optimizer_math {

// SGD without momentum: w = w + (−lr)·(g + wd·w).
struct SgdUpdate {
  float neg_lr;
  float wd;
  ONNXTRAIN_HOST_DEVICE void operator()(float& w, float g) const { w = w + neg_lr * (g + wd * w); }
};

// SGD with momentum: buf = buf·μ + c·(g + wd·w);  w = w + (−lr)·buf.
// c (grad_coef) is 1 on the parameter's first update (torch sets the buffer to the gradient), else
// 1 − dampening.
struct SgdMomentumUpdate {
  float neg_lr;
  float wd;
  float mu;
  float grad_coef;
  ONNXTRAIN_HOST_DEVICE void operator()(float& w, float g, float& buf) const {
    buf = buf * mu + grad_coef * (g + wd * w);
    w = w + neg_lr * buf;
  }
};

// Nesterov: d = g + wd·w;  buf = buf·μ + c·d;  w = w + (−lr)·(d + μ·buf).
struct SgdNesterovUpdate {
  float neg_lr;
  float wd;
  float mu;
  float grad_coef;
  ONNXTRAIN_HOST_DEVICE void operator()(float& w, float g, float& buf) const {
    const float d = g + wd * w;
    buf = buf * mu + grad_coef * d;
    w = w + neg_lr * (d + mu * buf);
  }
};

inline SgdUpdate sgd_plain_update(double lr, double weight_decay) {
  return {.neg_lr = static_cast<float>(-lr), .wd = static_cast<float>(weight_decay)};
}
// The momentum scalars of an update made when the parameter has had `count_before` updates.
inline SgdMomentumUpdate sgd_momentum_update(double lr, double weight_decay, double momentum, double dampening,
                                             int64_t count_before) {
  return {.neg_lr = static_cast<float>(-lr),
          .wd = static_cast<float>(weight_decay),
          .mu = static_cast<float>(momentum),
          .grad_coef = count_before == 0 ? 1.0f : static_cast<float>(1.0 - dampening)};
}
inline SgdNesterovUpdate sgd_nesterov_update(double lr, double weight_decay, double momentum, double dampening,
                                             int64_t count_before) {
  const SgdMomentumUpdate m = sgd_momentum_update(lr, weight_decay, momentum, dampening, count_before);
  return {.neg_lr = m.neg_lr, .wd = m.wd, .mu = m.mu, .grad_coef = m.grad_coef};
}

// Adam / AdamW (either convention; executor/optim/adam.cc computes the factors):
//   wi = w·decay (adamw: 1 − lr·wd, else 1);  g' = g + l2·wi (adam: wd, else 0)
//   m = m·β1 + (1 − β1)·g';  h = h·β2 + (1 − β2)·g'·g';  amsgrad: hmax = max(hmax, h), whose root is used
//   w = (wi + (−step_scale)·m / (√h / root_divisor + eps))·post
struct AdamUpdate {
  float decay;
  float l2;
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float neg_step;      // −step_scale (lr and the first moment's bias correction)
  float root_divisor;  // torch divides √h by √(1 − β2^t); 1 in the onnx convention
  float eps;
  float post;  // 1 − post_update_decay

  // Without amsgrad.
  ONNXTRAIN_HOST_DEVICE void operator()(float& w, float g, float& m, float& h) const {
    const float wi = moments(w, g, m, h);
    w = (wi + neg_step * m / (std::sqrt(h) / root_divisor + eps)) * post;
  }
  // With amsgrad: hmax keeps the running maximum of h (std::max's comparison, spelled out for device code).
  ONNXTRAIN_HOST_DEVICE void operator()(float& w, float g, float& m, float& h, float& hmax) const {
    const float wi = moments(w, g, m, h);
    hmax = hmax < h ? h : hmax;
    w = (wi + neg_step * m / (std::sqrt(hmax) / root_divisor + eps)) * post;
  }

 private:
  // The decayed weight, after updating both moments.
  ONNXTRAIN_HOST_DEVICE float moments(float w, float g, float& m, float& h) const {
    const float wi = w * decay;
    const float gi = g + l2 * wi;
    m = m * beta1 + one_minus_beta1 * gi;
    h = h * beta2 + one_minus_beta2 * gi * gi;
    return wi;
  }
};

// The factors of an Adam update made when the parameter has had `count_before` updates:
// w += −step_scale·m / (√h / root_divisor + eps). torch: t = count_before + 1, bias corrections
// 1 − β1^t and √(1 − β2^t) (root_divisor); onnx: T = count_before, lr·√(1 − β2^T)/(1 − β1^T), none at T = 0.
struct AdamFactors {
  double step_scale;    // multiplies m (lr included)
  double root_divisor;  // divides √h
};

inline AdamFactors adam_factors(bool torch_convention, double beta1, double beta2, int64_t count_before, double lr) {
  if (torch_convention) {
    const double t = static_cast<double>(count_before + 1);
    const double bc1 = 1 - std::pow(beta1, t), bc2 = 1 - std::pow(beta2, t);
    return {lr / bc1, std::sqrt(bc2)};
  }
  if (count_before == 0) return {lr, 1.0};
  const double t = static_cast<double>(count_before);
  return {lr * std::sqrt(1 - std::pow(beta2, t)) / (1 - std::pow(beta1, t)), 1.0};
}

// The scalars of one Adam update; `decoupled` selects AdamW's decay (w·(1 − lr·wd)) over L2.
inline AdamUpdate adam_update(bool decoupled, bool torch_convention, double lr, double weight_decay, double beta1,
                              double beta2, double eps, double post_update_decay, int64_t count_before) {
  const AdamFactors f = adam_factors(torch_convention, beta1, beta2, count_before, lr);
  return {.decay = decoupled ? static_cast<float>(1.0 - lr * weight_decay) : 1.0f,
          .l2 = decoupled ? 0.0f : static_cast<float>(weight_decay),
          .beta1 = static_cast<float>(beta1),
          .one_minus_beta1 = static_cast<float>(1.0 - beta1),
          .beta2 = static_cast<float>(beta2),
          .one_minus_beta2 = static_cast<float>(1.0 - beta2),
          .neg_step = static_cast<float>(-f.step_scale),
          .root_divisor = static_cast<float>(f.root_divisor),
          .eps = static_cast<float>(eps),
          .post = static_cast<float>(1.0 - post_update_decay)};
}

// Adagrad: g' = g + wd·w;  sum = sum + g'·g';  w = w + (−clr)·g' / (√sum + eps),
// clr = lr / (1 + count_before·lr_decay).
struct AdagradUpdate {
  float wd;
  float neg_clr;
  float eps;
  ONNXTRAIN_HOST_DEVICE void operator()(float& w, float g, float& sum) const {
    const float gi = g + wd * w;
    sum = sum + gi * gi;
    w = w + neg_clr * gi / (std::sqrt(sum) + eps);
  }
};

inline AdagradUpdate adagrad_update(double lr, double weight_decay, double lr_decay, double eps, int64_t count_before) {
  return {.wd = static_cast<float>(weight_decay),
          .neg_clr = static_cast<float>(-(lr / (1 + static_cast<double>(count_before) * lr_decay))),
          .eps = static_cast<float>(eps)};
}

}  // namespace onnxtrain::optimizer_math
