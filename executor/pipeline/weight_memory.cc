#include "executor/pipeline/weight_memory.h"

#include <algorithm>
#include <cstring>

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

void WeightMemory::step(Optimizer& optimizer, std::span<const DeviceParamSlot> params) {
  if (store_) {
    device_optimizer_->step(optimizer, params);
    return;
  }
  std::vector<ParamSlot> slots;
  slots.reserve(params.size());
  for (const DeviceParamSlot& p : params) {
    const auto n = static_cast<size_t>(p.numel);
    slots.push_back({p.name, std::span<float>(p.value, n), std::span<const float>(p.grad, n)});
  }
  optimizer.step(slots);
}

void WeightMemory::predict(Optimizer& optimizer, const std::string& param, float* out, const float* w, size_t n,
                           int64_t s) {
  const OptimizerConfig& c = optimizer.config();
  const bool momentum = c.kind == OptimizerKind::sgd && c.momentum != 0;
  const bool adam = c.kind == OptimizerKind::adam || c.kind == OptimizerKind::adamw;
  // Every parameter of a stage has its state once the stage has stepped (no state sync: on a device the
  // host state holds the step counts, the arrays are the device optimizer's).
  const ParamState* state = optimizer.global_step() > 0 ? &optimizer.state(param) : nullptr;
  if (!state || state->step == 0 || !(momentum || adam)) {
    copy(out, w, n);  // no direction: Ŵ = W − s·0
    return;
  }
  std::vector<const float*> states;  // in Optimizer::state_names() order
  if (store_) {
    states = device_optimizer_->states_of(optimizer, param, static_cast<int64_t>(n));
  } else {
    for (const std::string& name : optimizer.state_names()) states.push_back(state->tensor(name).data());
  }
  const auto lr = static_cast<float>(optimizer.current_lr());
  const auto ahead = static_cast<float>(s);
  if (momentum) {
    const optimizer_math::MomentumPrediction f{.lr = lr, .s = ahead};
    if (!store_) {
      for (size_t i = 0; i < n; ++i) f(out[i], w[i], states[0][i]);
      return;
    }
#if ONNXTRAIN_WITH_CUDA
    cuda::predict_weights(f, out, w, states[0], static_cast<int64_t>(n), store_->stream().kernel_stream(0));
#endif
    return;
  }
  // Adam's direction uses the factors of its last update, at lr 1 (the prediction's lr is applied after).
  const optimizer_math::AdamFactors a =
      optimizer_math::adam_factors(c.convention == AdamConvention::torch, c.beta1, c.beta2, state->step - 1, 1.0);
  const optimizer_math::AdamPrediction f{
      .scale = static_cast<float>(a.step_scale),
      .root_divisor = static_cast<float>(a.root_divisor),
      .eps = static_cast<float>(c.eps),
      .wd = c.kind == OptimizerKind::adamw ? static_cast<float>(c.weight_decay) : 0.0f,
      .lr = lr,
      .s = ahead};
  const float* h = states.at(c.amsgrad ? 2 : 1);
  if (!store_) {
    for (size_t i = 0; i < n; ++i) f(out[i], w[i], states[0][i], h[i]);
    return;
  }
#if ONNXTRAIN_WITH_CUDA
  cuda::predict_weights(f, out, w, states[0], h, static_cast<int64_t>(n), store_->stream().kernel_stream(0));
#endif
}

void WeightMemory::sync_state(std::map<std::string, ParamState>& states) {
  if (device_optimizer_) device_optimizer_->sync_to_host(states);
}

void WeightMemory::state_loaded() {
  if (device_optimizer_) device_optimizer_->state_loaded();
}

}  // namespace onnxtrain
