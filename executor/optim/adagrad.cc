// torch.optim.Adagrad (1.13, _single_tensor_adagrad), in torch's float32 operation order:
//   g = g + wd·w;  clr = lr / (1 + (step − 1)·lr_decay) with step counted after this update;
//   sum = sum + g·g (sum starts at initial_accumulator_value);  w = w + (−clr)·g / (√sum + eps)
#include <cmath>

#include "executor/optimizer.h"

namespace onnxtrain::optim {

void adagrad_update(const OptimizerConfig& c, std::span<float> w, std::span<const float> g, ParamState& s, double lr) {
  const size_t n = w.size();
  float* __restrict wp = w.data();
  const float* __restrict gp = g.data();
  float* __restrict sum = state_tensor(s, "sum", n, static_cast<float>(c.initial_accumulator_value)).data();
  const float wd = static_cast<float>(c.weight_decay);
  const float neg_clr = static_cast<float>(-(lr / (1 + static_cast<double>(s.step) * c.lr_decay)));
  const float eps = static_cast<float>(c.eps);
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    const float gi = gp[i] + wd * wp[i];
    sum[i] = sum[i] + gi * gi;
    wp[i] = wp[i] + neg_clr * gi / (std::sqrt(sum[i]) + eps);
  }
  ++s.step;
}

}  // namespace onnxtrain::optim
