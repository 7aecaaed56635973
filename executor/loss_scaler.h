// Dynamic loss scaling for float16 training, with torch.cuda.amp.GradScaler's semantics: the loss is
// multiplied by `scale` before the backward pass (so that small float16 gradients do not flush to zero),
// the gradients are divided by it before the optimizer, and a step whose unscaled gradients hold an inf
// or NaN is skipped (weights, optimizer state and step count unchanged) while the scale backs off;
// `growth_interval` consecutive finite steps grow it.
//
//   LossScaler scaler;                                   // 65536, ×2 every 2000 finite steps, ×0.5 on overflow
//   feed["loss_scale"] = scalar(scaler.scale());
//   bool finite = LossScaler::unscale(gradients, scaler.scale());   // in place: g /= scale
//   if (finite) optimizer.step(...);
//   scaler.update(finite);
//
// bfloat16 has float32's exponent range and needs none (PyTorch's autocast does not scale it either).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "graph/tensor.h"

namespace onnxtrain {

struct LossScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  void validate() const;  // throws Error naming a value out of range
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options = {});

  double scale() const { return scale_; }
  // Consecutive finite steps since the scale last changed (GradScaler's growth tracker).
  int64_t growth_tracker() const { return growth_tracker_; }
  // Steps skipped so far because of inf/NaN gradients.
  int64_t skipped_steps() const { return skipped_; }
  const LossScalerOptions& options() const { return options_; }

  // Multiplies every element by 1/scale (as GradScaler does, in float32) and returns whether all the
  // scaled values were finite (kernels/loss_scale_math.h).
  static bool unscale(std::span<float> gradient, double scale);

  // After a step: a non-finite one backs the scale off and resets the tracker; the growth_interval-th
  // finite one in a row grows the scale and resets the tracker.
  void update(bool finite);
  // update() for a step with these (unscaled) gradients; returns whether all of them are finite.
  bool update(const std::map<std::string, Tensor>& gradients);
  // Puts the scaler where a run was (a checkpoint's values).
  void restore(double scale, int64_t growth_tracker, int64_t skipped);
  // The state as checkpoint tensors: "loss_scaler/scale" (a float64 scalar), "loss_scaler/growth_tracker"
  // and "loss_scaler/skipped_steps" (int64 scalars).
  std::map<std::string, Tensor> state_tensors() const;
  // Restores from those tensors and erases them from `state`; throws Error naming a missing one.
  void restore(std::map<std::string, Tensor>& state);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace onnxtrain
