// torch.optim.Adagrad (1.13, _single_tensor_adagrad), in torch's float32 operation order:
//   g = g + wd·w;  clr = lr / (1 + (step − 1)·lr_decay) with step counted after this update;
//   sum = sum + g·g (sum starts at initial_accumulator_value);  w = w + (−clr)·g / (√sum + eps)
// The per-element math is kernels/optimizer_math.h's, chosen by adagrad_rule (shared with the device
// optimizer, executor/device_optimizer.h, whose CUDA kernels run the same functor).
#include "executor/optim/threaded_update.h"
#include "executor/optimizer.h"
#include "kernels/optimizer_math.h"

namespace onnxtrain::optim {

UpdateRule adagrad_rule(const OptimizerConfig& c, int64_t count_before, double lr) {
  return optimizer_math::adagrad_update(lr, c.weight_decay, c.lr_decay, c.eps, count_before);
}

void adagrad_update(const OptimizerConfig& c, std::span<float> w, std::span<const float> g, ParamState& s, double lr,
                    float grad_scale) {
  const size_t n = w.size();
  float* __restrict wp = w.data();
  const float* __restrict gp = g.data();
  float* __restrict sum = state_tensor(s, "sum", n, initial_state_value(c, "sum")).data();
  const optimizer_math::AdagradUpdate f = std::get<optimizer_math::AdagradUpdate>(adagrad_rule(c, s.step, lr));
#pragma omp parallel for simd if (n >= kThreadedUpdateElements) schedule(static)
  for (size_t i = 0; i < n; ++i) f(wp[i], gp[i] * grad_scale, sum[i]);
  ++s.step;
}

}  // namespace onnxtrain::optim
