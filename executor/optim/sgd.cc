// torch.optim.SGD (1.13, _single_tensor_sgd), in torch's float32 operation order:
//   d = g + wd·w;  buf = buf·μ + c·d  (c = 1 on the first update, else 1 − dampening; buf starts at 0)
//   d = nesterov ? d + μ·buf : buf;  w = w + (−lr)·d
// The per-element math is kernels/optimizer_math.h's, chosen by sgd_rule (shared with the device optimizer,
// executor/device_optimizer.h, whose CUDA kernels run the same functors).
#include <algorithm>

#include "executor/optim/threaded_update.h"
#include "executor/optimizer.h"
#include "kernels/optimizer_math.h"

namespace onnxtrain::optim {

UpdateRule sgd_rule(const OptimizerConfig& c, int64_t count_before, double lr) {
  if (c.momentum == 0) return optimizer_math::sgd_plain_update(lr, c.weight_decay);
  if (c.nesterov) return optimizer_math::sgd_nesterov_update(lr, c.weight_decay, c.momentum, c.dampening, count_before);
  return optimizer_math::sgd_momentum_update(lr, c.weight_decay, c.momentum, c.dampening, count_before);
}

void sgd_update(const OptimizerConfig& c, std::span<float> w, std::span<const float> g, ParamState& s, double lr,
                float grad_scale, float* mirror) {
  const size_t n = w.size();
  float* __restrict wp = w.data();
  const float* __restrict gp = g.data();
  const UpdateRule rule = sgd_rule(c, s.step, lr);
  if (c.momentum == 0) {
    const optimizer_math::SgdUpdate f = std::get<optimizer_math::SgdUpdate>(rule);
#pragma omp parallel for simd if (n >= kThreadedUpdateElements) schedule(static)
    for (size_t i = 0; i < n; ++i) f(wp[i], gp[i] * grad_scale);
  } else {
    float* __restrict buf = state_tensor(s, "momentum_buffer", n, initial_state_value(c, "momentum_buffer")).data();
    if (c.nesterov) {
      const optimizer_math::SgdNesterovUpdate f = std::get<optimizer_math::SgdNesterovUpdate>(rule);
#pragma omp parallel for simd if (n >= kThreadedUpdateElements) schedule(static)
      for (size_t i = 0; i < n; ++i) f(wp[i], gp[i] * grad_scale, buf[i]);
    } else if (mirror) {  // momentum SGD, the default: the mirror written in the update's own pass
      const optimizer_math::SgdMomentumUpdate f = std::get<optimizer_math::SgdMomentumUpdate>(rule);
      float* __restrict mp = mirror;
#pragma omp parallel for simd if (n >= kThreadedUpdateElements) schedule(static)
      for (size_t i = 0; i < n; ++i) {
        f(wp[i], gp[i] * grad_scale, buf[i]);
        mp[i] = wp[i];
      }
      mirror = nullptr;
    } else {
      const optimizer_math::SgdMomentumUpdate f = std::get<optimizer_math::SgdMomentumUpdate>(rule);
#pragma omp parallel for simd if (n >= kThreadedUpdateElements) schedule(static)
      for (size_t i = 0; i < n; ++i) f(wp[i], gp[i] * grad_scale, buf[i]);
    }
  }
  if (mirror) std::copy(wp, wp + n, mirror);  // plain and Nesterov SGD: no mirrored loop
  ++s.step;
}

}  // namespace onnxtrain::optim
