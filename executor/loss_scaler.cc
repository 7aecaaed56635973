#include "executor/loss_scaler.h"

#include <cmath>
#include <string>

#include "graph/error.h"
#include "kernels/loss_scale_math.h"

namespace onnxtrain {

void LossScalerOptions::validate() const {
  if (!(init_scale > 0) || !std::isfinite(init_scale))
    throw Error("loss scaler: init_scale must be positive and finite, got " + std::to_string(init_scale));
  if (!(growth_factor > 1)) throw Error("loss scaler: growth_factor must be > 1, got " + std::to_string(growth_factor));
  if (!(backoff_factor > 0 && backoff_factor < 1))
    throw Error("loss scaler: backoff_factor must be in (0, 1), got " + std::to_string(backoff_factor));
  if (growth_interval < 1)
    throw Error("loss scaler: growth_interval must be >= 1, got " + std::to_string(growth_interval));
}

LossScaler::LossScaler(LossScalerOptions options) : options_(options), scale_(options.init_scale) {
  options_.validate();
}

bool LossScaler::unscale(std::span<float> gradient, double scale) {
  // GradScaler multiplies by the float32 reciprocal of the scale.
  const optimizer_math::UnscaleGradient f{.inverse = static_cast<float>(1.0 / scale)};
  bool finite = true;
  for (float& g : gradient) finite = f(g) && finite;
  return finite;
}

void LossScaler::update(bool finite) {
  if (!finite) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
    ++skipped_;
    return;
  }
  if (++growth_tracker_ == options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
}

void LossScaler::restore(double scale, int64_t growth_tracker, int64_t skipped) {
  if (!(scale > 0) || !std::isfinite(scale) || growth_tracker < 0 || growth_tracker >= options_.growth_interval)
    throw Error("loss scaler: cannot restore scale " + std::to_string(scale) + " with growth tracker " +
                std::to_string(growth_tracker));
  scale_ = scale;
  growth_tracker_ = growth_tracker;
  skipped_ = skipped;
}

bool LossScaler::update(const std::map<std::string, Tensor>& gradients) {
  bool finite = true;
  for (const auto& [name, g] : gradients)
    for (float v : g.data<float>()) finite = finite && std::isfinite(v);
  update(finite);
  return finite;
}

std::map<std::string, Tensor> LossScaler::state_tensors() const {
  Tensor scale(DType::Float64, {}), tracker(DType::Int64, {}), skipped(DType::Int64, {});
  scale.data<double>()[0] = scale_;
  tracker.data<int64_t>()[0] = growth_tracker_;
  skipped.data<int64_t>()[0] = skipped_;
  return {
      {"loss_scaler/scale", scale}, {"loss_scaler/growth_tracker", tracker}, {"loss_scaler/skipped_steps", skipped}};
}

void LossScaler::restore(std::map<std::string, Tensor>& state) {
  auto take = [&](const std::string& key, DType dtype) {
    auto it = state.find(key);
    if (it == state.end() || it->second.dtype() != dtype || it->second.numel() != 1) {
      throw Error("the saved state has no " + std::string(dtype_name(dtype)) + " scalar '" + key +
                  "' (an fp16 run's loss scaler): it was not written by an fp16 run");
    }
    Tensor t = it->second;
    state.erase(it);
    return t;
  };
  const double scale = take("loss_scaler/scale", DType::Float64).data<double>()[0];
  const int64_t tracker = take("loss_scaler/growth_tracker", DType::Int64).data<int64_t>()[0];
  const int64_t skipped = take("loss_scaler/skipped_steps", DType::Int64).data<int64_t>()[0];
  restore(scale, tracker, skipped);
}

}  // namespace onnxtrain
