// torch.optim.Adam / AdamW (1.13, single-tensor loops), in torch's float32 operation order:
//   adamw: w = w·(1 − lr·wd)             adam: g = g + wd·w
//   m = m·β1 + (1 − β1)·g;  h = h·β2 + (1 − β2)·g·g;  amsgrad: hmax = max(hmax, h), used for h below
//   torch: t = step + 1;  denom = √h / √(1 − β2^t) + eps;  w = w + (−lr / (1 − β1^t))·m / denom
//   onnx:  T = step;  denom = √h + eps;  w = w + (−lr·√(1 − β2^T) / (1 − β1^T))·m / denom  (factor 1 at T = 0)
//   then w = (1 − post_update_decay)·w when that is set. Scalars are computed in double, as torch does.
// The per-element math and the per-step scalars are kernels/optimizer_math.h's, chosen by adam_rule (shared
// with the device optimizer, executor/device_optimizer.h, whose CUDA kernels run the same functor).
#include <cmath>

#include "executor/optim/threaded_update.h"
#include "executor/optimizer.h"
#include "kernels/optimizer_math.h"

namespace onnxtrain::optim {

namespace {

template <bool kAmsgrad>
void adam_loop(const optimizer_math::AdamUpdate& f, size_t n, float* __restrict w, const float* __restrict g,
               float grad_scale, float* __restrict m, float* __restrict h, float* __restrict hmax) {
#pragma omp parallel for simd if (n >= kThreadedUpdateElements) schedule(static)
  for (size_t i = 0; i < n; ++i) {
    if constexpr (kAmsgrad)
      f(w[i], g[i] * grad_scale, m[i], h[i], hmax[i]);
    else
      f(w[i], g[i] * grad_scale, m[i], h[i]);
  }
}

}  // namespace

UpdateRule adam_rule(const OptimizerConfig& c, int64_t count_before, double lr) {
  return optimizer_math::adam_update(c.kind == OptimizerKind::adamw, c.convention == AdamConvention::torch, lr,
                                     c.weight_decay, c.beta1, c.beta2, c.eps, c.post_update_decay, count_before);
}

void adam_update(const OptimizerConfig& c, std::span<float> w, std::span<const float> g, ParamState& s, double lr,
                 float grad_scale) {
  const size_t n = w.size();
  float* m = state_tensor(s, "exp_avg", n, initial_state_value(c, "exp_avg")).data();
  float* h = state_tensor(s, "exp_avg_sq", n, initial_state_value(c, "exp_avg_sq")).data();
  const optimizer_math::AdamUpdate f = std::get<optimizer_math::AdamUpdate>(adam_rule(c, s.step, lr));
  if (c.amsgrad) {
    adam_loop<true>(f, n, w.data(), g.data(), grad_scale, m, h,
                    state_tensor(s, "max_exp_avg_sq", n, initial_state_value(c, "max_exp_avg_sq")).data());
  } else {
    adam_loop<false>(f, n, w.data(), g.data(), grad_scale, m, h, nullptr);
  }
  ++s.step;
}

}  // namespace onnxtrain::optim
