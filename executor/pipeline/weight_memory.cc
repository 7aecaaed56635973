#include "executor/pipeline/weight_memory.h"

#include <algorithm>
#include <cstring>

#include "executor/weight_prediction.h"
#include "graph/error.h"
#include "kernels/optimizer_math.h"
#include "kernels/weight_math.h"

#if ONNXTRAIN_WITH_CUDA
#include "kernels/cuda/optimizer_update.h"
#endif

namespace onnxtrain {
namespace {
constexpr const char* kNoCuda = "weight arrays on a device need CUDA support: this onnxtrain was built without it";
}  // namespace

WeightMemory::WeightMemory(std::shared_ptr<DeviceInitializerStore> store) : store_(std::move(store)) {
  if (store_) device_optimizer_ = std::make_unique<DeviceOptimizer>(store_);
}

WeightMemory::~WeightMemory() = default;
WeightMemory::WeightMemory(WeightMemory&&) noexcept = default;

WeightArray WeightMemory::make(size_t n) const {
  WeightArray a;
  a.size = n;
  if (!store_) {
    a.host.resize(n);
  } else if (n > 0) {
    a.device = cuda::DeviceBuffer(store_->stream(), n * sizeof(float));
  }
  return a;
}

void WeightMemory::copy(float* dst, const float* src, size_t n) const {
  if (dst == src || n == 0) return;
  if (store_) {
    cuda::copy_on_device(dst, src, n * sizeof(float), store_->stream());
  } else {
    std::memcpy(dst, src, n * sizeof(float));
  }
}

void WeightMemory::accumulate(float* acc, const float* g, size_t n, float weight, bool first) const {
  const optimizer_math::AccumulateGradient f{.weight = weight, .first = first};
  if (!store_) {
    for (size_t i = 0; i < n; ++i) f(acc[i], g[i]);
    return;
  }
#if ONNXTRAIN_WITH_CUDA
  cuda::accumulate_gradient(f, acc, g, static_cast<int64_t>(n), store_->stream().kernel_stream(0));
#else
  throw Error(kNoCuda);  // unreachable: a store cannot be made without CUDA
#endif
}

void WeightMemory::scale(float* v, size_t n, float s) const {
  const optimizer_math::ScaleValue f{.scale = s};
  if (!store_) {
    for (size_t i = 0; i < n; ++i) f(v[i]);
    return;
  }
#if ONNXTRAIN_WITH_CUDA
  cuda::scale_values(f, v, static_cast<int64_t>(n), store_->stream().kernel_stream(0));
#else
  throw Error(kNoCuda);  // unreachable: a store cannot be made without CUDA
#endif
}

void WeightMemory::upload(float* dst, std::span<const float> src) const {
  if (src.empty()) return;
  if (store_) {
    cuda::copy_to_device(dst, src.data(), src.size_bytes(), store_->stream());
  } else {
    std::copy(src.begin(), src.end(), dst);
  }
}

void WeightMemory::download(std::span<float> dst, const float* src, bool wait_for_it) const {
  if (dst.empty()) return;
  if (!store_) {
    std::copy(src, src + dst.size(), dst.begin());
    return;
  }
  cuda::copy_to_host(dst.data(), src, dst.size_bytes(), store_->stream());
  if (wait_for_it) wait();
}

void WeightMemory::wait() const {
  if (store_) store_->stream().synchronize();
}

float* WeightMemory::working(const std::string& name, const Tensor& host) const {
  if (!store_) return const_cast<float*>(host.data<float>().data());  // the Tensor's shared buffer
  store_->data(name, host);  // the entry exists (uploaded once) before it is written in place
  return static_cast<float*>(store_->data_for_update(name));
}

void WeightMemory::sync_working_to_host() const {
  if (store_) store_->sync_to_host();
}

void WeightMemory::step(Optimizer& optimizer, std::span<const DeviceParamSlot> params, float grad_scale) {
  ONNXTRAIN_CHECK(grad_scale == 1.0f || scales_in_step(),
                  "gradients scaled in the step on a device or for a predictor");
  if (keep_averages_)
    for (const DeviceParamSlot& p : params) observe_gradient(p.name, p.grad, static_cast<size_t>(p.numel));
  if (store_) {
    for (const DeviceParamSlot& p : params) ONNXTRAIN_CHECK(!p.mirror, "a mirrored update on a device");
    device_optimizer_->step(optimizer, params);
    return;
  }
  std::vector<ParamSlot> slots;
  slots.reserve(params.size());
  for (const DeviceParamSlot& p : params) {
    const auto n = static_cast<size_t>(p.numel);
    slots.push_back({p.name, std::span<float>(p.value, n), std::span<const float>(p.grad, n), grad_scale,
                     p.mirror ? std::span<float>(p.mirror, n) : std::span<float>()});
  }
  optimizer.step(slots);
}

void WeightMemory::enable_prediction(const Optimizer& optimizer) {
  keep_averages_ = gradient_estimate(optimizer.config()) == GradientEstimate::kept_average;
  average_beta_ = static_cast<float>(kept_average_beta(optimizer.config()));
}

void WeightMemory::observe_gradient(const std::string& param, const float* g, size_t n) {
  KeptAverage& kept = averages_[param];
  if (kept.average.size != n) kept = {.average = make(n), .observed = 0};
  const optimizer_math::SmoothGradient f{
      .beta = average_beta_, .one_minus_beta = 1.0f - average_beta_, .first = kept.observed == 0};
  ++kept.observed;
  float* avg = kept.average.data();
  if (!store_) {
    for (size_t i = 0; i < n; ++i) f(avg[i], g[i]);
    return;
  }
#if ONNXTRAIN_WITH_CUDA
  cuda::smooth_gradient(f, avg, g, static_cast<int64_t>(n), store_->stream().kernel_stream(0));
#else
  throw Error(kNoCuda);  // unreachable: a store cannot be made without CUDA
#endif
}

int64_t WeightMemory::prediction_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, kept] : averages_) bytes += static_cast<int64_t>(kept.average.size * sizeof(float));
  return bytes;
}

std::map<std::string, Tensor> WeightMemory::prediction_state() const {
  std::map<std::string, Tensor> out;
  for (const auto& [name, kept] : averages_) {
    Tensor average(DType::Float32, {static_cast<int64_t>(kept.average.size)});
    download(average.data<float>(), kept.average.data());
    out[name + "/average"] = std::move(average);
    out[name + "/observed"] = Tensor::scalar_int64(kept.observed);
  }
  return out;
}

void WeightMemory::load_prediction_state(const std::map<std::string, Tensor>& saved,
                                         const std::vector<std::pair<std::string, size_t>>& parameters) {
  averages_.clear();
  for (const auto& [name, n] : parameters) {
    auto average = saved.find(name + "/average");
    auto observed = saved.find(name + "/observed");
    if (average == saved.end() || observed == saved.end()) continue;
    if (average->second.dtype() != DType::Float32 || average->second.numel() != static_cast<int64_t>(n) ||
        observed->second.numel() != 1 || !is_integer(observed->second.dtype()))
      throw Error("predictor state of '" + name + "': expected a float32 average of " + std::to_string(n) +
                  " elements and an integer count");
    KeptAverage kept{.average = make(n), .observed = observed->second.to_int64()[0]};
    upload(kept.average.data(), average->second.data<float>());
    averages_[name] = std::move(kept);
  }
}

void WeightMemory::predict(Optimizer& optimizer, const std::string& param, float* out, const float* w, size_t n,
                           int64_t s) {
  if (s == 0) {  // no prediction asked (a parameter server's plain pull): Ŵ = W, kept average or not
    copy(out, w, n);
    return;
  }
  // Every parameter of a stage has its state once the stage has stepped (no state sync: on a device the
  // host state holds the step counts, the arrays are the device optimizer's).
  const int64_t updates = optimizer.global_step() > 0 ? optimizer.state(param).step : 0;
  const KeptAverage* kept = nullptr;
  const bool estimate_kept = gradient_estimate(optimizer.config()) == GradientEstimate::kept_average;
  if (estimate_kept) {
    auto it = averages_.find(param);
    kept = it == averages_.end() ? nullptr : &it->second;
    ONNXTRAIN_CHECK(kept || updates == 0 || keep_averages_, "weight prediction was not enabled for '" + param + "'");
  }
  // A kept average that is missing (a checkpoint written without it) has seen nothing yet.
  const int64_t estimated_from = kept ? kept->observed : estimate_kept ? 0 : updates;
  if (s == 0 || updates == 0 || estimated_from == 0) {
    copy(out, w, n);  // no estimate yet: Ŵ = W
    return;
  }
  std::vector<const float*> states;  // in Optimizer::state_names() order
  if (store_) {
    states = device_optimizer_->states_of(optimizer, param, static_cast<int64_t>(n));
  } else {
    for (const std::string& name : optimizer.state_names())
      states.push_back(optimizer.state(param).tensor(name).data());
  }
  const float* estimate = kept ? kept->average.data() : states.at(0);
  const PredictionRule rule = prediction_rule(optimizer, updates, estimated_from, s);
  if (!store_) {
    predict_on_host(rule, states, estimate, w, out, n);
    return;
  }
#if ONNXTRAIN_WITH_CUDA
  dispatch_prediction(rule, states, [&](const auto& f, const auto*... arrays) {
    cuda::predict_weights(f, out, w, estimate, arrays..., static_cast<int64_t>(n), store_->stream().kernel_stream(0));
  });
#else
  throw Error(kNoCuda);  // unreachable: a store cannot be made without CUDA
#endif
}

void WeightMemory::sync_state(std::map<std::string, ParamState>& states) {
  if (device_optimizer_) device_optimizer_->sync_to_host(states);
}

void WeightMemory::state_loaded() {
  if (device_optimizer_) device_optimizer_->state_loaded();
}

}  // namespace onnxtrain
