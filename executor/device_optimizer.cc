#include "executor/device_optimizer.h"

#if ONNXTRAIN_WITH_CUDA
#include "kernels/cuda/optimizer_update.h"
#endif

namespace onnxtrain {

DeviceOptimizer::DeviceOptimizer(std::shared_ptr<DeviceInitializerStore> store) : store_(std::move(store)) {
  ONNXTRAIN_CHECK(store_ != nullptr, "DeviceOptimizer needs a device initializer store");
}

DeviceOptimizer::~DeviceOptimizer() = default;

void DeviceOptimizer::step(Optimizer& optimizer, std::span<const DeviceParamSlot> params) {
#if !ONNXTRAIN_WITH_CUDA
  (void)optimizer;
  (void)params;
  throw Error("the device optimizer needs CUDA support: this onnxtrain was built without it (-DONNXTRAIN_CUDA=ON)");
#else
  const double lr = optimizer.current_lr();
  const OptimizerConfig& c = optimizer.config();
  names_ = optimizer.state_names();
  const cuda::DeviceStream& stream = store_->stream();
  const Stream kernel_stream = stream.kernel_stream(0);  // the update kernels draw no random numbers
  for (const DeviceParamSlot& p : params) {
    try {
      ParamState& s = optimizer.state(p.name);
      const std::vector<float*> arrays = arrays_for(optimizer, p.name, p.numel);
      const optim::UpdateRule rule = optim::update_rule(c, s.step, lr);
      // Set before the launch, not after the loop: when a later parameter throws, the ones updated so far
      // have newer device states (and counted steps) that sync_to_host must still download.
      host_stale_ = true;
      if (p.numel > 0) {
        dispatch_update(rule, arrays, [&](const auto& f, auto*... state) {
          cuda::optimizer_update(f, p.value, p.grad, state..., p.numel, kernel_stream);
        });
      }
      ++s.step;
    } catch (Error& e) {
      throw Error("parameter '" + p.name + "': " + e.message());
    }
  }
  optimizer.count_step();
#endif
}

#if ONNXTRAIN_WITH_CUDA
std::vector<float*> DeviceOptimizer::arrays_for(Optimizer& optimizer, const std::string& param, int64_t numel) {
  const OptimizerConfig& c = optimizer.config();
  ParamState& s = optimizer.state(param);
  const cuda::DeviceStream& stream = store_->stream();
  const size_t n = static_cast<size_t>(numel), bytes = n * sizeof(float);
  std::vector<DeviceTensor>& dev = states_[param];
  if (dev.size() != names_.size()) {
    // The first use since construction or load_state: the device state starts as the host one, made (and
    // checked for size) exactly as the host update would make it.
    dev.clear();
    for (const std::string& name : names_) {
      const std::span<float> host = optim::state_tensor(s, name, n, optim::initial_state_value(c, name));
      DeviceTensor t{.buffer = bytes ? cuda::DeviceBuffer(stream, bytes) : cuda::DeviceBuffer(),
                     .dtype = DType::Float32,
                     .sizes = {numel}};
      if (bytes) cuda::copy_to_device(t.buffer.data(), host.data(), bytes, stream);
      dev.push_back(std::move(t));
    }
  }
  std::vector<float*> arrays;
  for (size_t k = 0; k < dev.size(); ++k) {
    if (dev[k].numel() != numel) {
      throw Error("optimizer state: '" + names_[k] + "' has " + std::to_string(dev[k].numel()) +
                  " elements, the parameter " + std::to_string(numel));
    }
    arrays.push_back(dev[k].floats());
  }
  return arrays;
}
#endif

std::vector<const float*> DeviceOptimizer::states_of(Optimizer& optimizer, const std::string& param, int64_t numel) {
#if !ONNXTRAIN_WITH_CUDA
  (void)optimizer;
  (void)param;
  (void)numel;
  throw Error("the device optimizer needs CUDA support: this onnxtrain was built without it (-DONNXTRAIN_CUDA=ON)");
#else
  names_ = optimizer.state_names();
  const std::vector<float*> arrays = arrays_for(optimizer, param, numel);
  return {arrays.begin(), arrays.end()};
#endif
}

bool DeviceOptimizer::unscale(std::span<const DeviceTensor* const> gradients, double scale) {
#if !ONNXTRAIN_WITH_CUDA
  (void)gradients;
  (void)scale;
  throw Error("the device loss scaler needs CUDA support: this onnxtrain was built without it (-DONNXTRAIN_CUDA=ON)");
#else
  const cuda::DeviceStream& stream = store_->stream();
  const optimizer_math::UnscaleGradient f{.inverse = static_cast<float>(1.0 / scale)};
  int nonfinite = 0;
  cuda::DeviceBuffer flag(stream, sizeof(int));
  cuda::copy_to_device(flag.data(), &nonfinite, sizeof(int), stream);
  for (const DeviceTensor* g : gradients) {
    if (g->dtype != DType::Float32) throw Error("loss scaling: a gradient on the device is not float32");
    cuda::unscale_gradient(f, g->floats(), g->numel(), static_cast<int*>(flag.data()), stream.kernel_stream(0));
  }
  cuda::copy_to_host(&nonfinite, flag.data(), sizeof(int), stream);
  stream.synchronize();
  return nonfinite == 0;
#endif
}

void DeviceOptimizer::sync_to_host(std::map<std::string, ParamState>& states) {
  if (!host_stale_) return;
  const cuda::DeviceStream& stream = store_->stream();
  for (const auto& [param, dev] : states_) {
    ParamState& s = states[param];
    for (size_t k = 0; k < dev.size() && k < names_.size(); ++k) {
      Tensor& host = s.tensors[names_[k]];
      if (host.empty() || host.dtype() != DType::Float32 || host.numel() != dev[k].numel())
        host = Tensor(DType::Float32, {dev[k].numel()});
      if (host.nbytes()) cuda::copy_to_host(host.raw(), dev[k].buffer.data(), host.nbytes(), stream);
    }
  }
  stream.synchronize();  // pageable destinations are complete only now
  host_stale_ = false;
}

void DeviceOptimizer::state_loaded() {
  states_.clear();
  host_stale_ = false;
}

}  // namespace onnxtrain
