// torch.optim.SGD (1.13, _single_tensor_sgd), in torch's float32 operation order:
//   d = g + wd·w;  buf = buf·μ + c·d  (c = 1 on the first update, else 1 − dampening; buf starts at 0)
//   d = nesterov ? d + μ·buf : buf;  w = w + (−lr)·d
#include <algorithm>

#include "executor/optimizer.h"

namespace onnxtrain::optim {

void sgd_update(const OptimizerConfig& c, std::span<float> w, std::span<const float> g, ParamState& s, double lr) {
  const size_t n = w.size();
  float* __restrict wp = w.data();
  const float* __restrict gp = g.data();
  const float wd = static_cast<float>(c.weight_decay);
  const float neg_lr = static_cast<float>(-lr);
  if (c.momentum == 0) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) wp[i] = wp[i] + neg_lr * (gp[i] + wd * wp[i]);
    ++s.step;
    return;
  }
  float* __restrict buf = state_tensor(s, "momentum_buffer", n).data();
  const float mu = static_cast<float>(c.momentum);
  const float grad_coef = s.step == 0 ? 1.0f : static_cast<float>(1.0 - c.dampening);
  if (c.nesterov) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) {
      const float d = gp[i] + wd * wp[i];
      buf[i] = buf[i] * mu + grad_coef * d;
      wp[i] = wp[i] + neg_lr * (d + mu * buf[i]);
    }
  } else {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) {
      buf[i] = buf[i] * mu + grad_coef * (gp[i] + wd * wp[i]);
      wp[i] = wp[i] + neg_lr * buf[i];
    }
  }
  ++s.step;
}

void sgd_direction(const OptimizerConfig& c, const ParamState& s, std::span<const float>, std::span<float> v) {
  if (c.momentum == 0) return;
  std::span<const float> buf = s.tensor("momentum_buffer");
  std::copy(buf.begin(), buf.end(), v.begin());
}

}  // namespace onnxtrain::optim
