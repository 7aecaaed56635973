// The optimizer step on a CUDA device: the host Optimizer's rules (executor/optimizer.h) with the weights,
// gradients and state tensors (momentum_buffer, exp_avg, ...) in device memory. The host Optimizer stays
// the bookkeeper: it gives the learning rate (its schedule at global_step), holds every ParamState::step
// and counts the steps; for each parameter the update's functor is optim::update_rule(config, step, lr),
// the very functor the host loop would run, launched by kernels/cuda/optimizer_update.h on the store's
// stream (no host wait), so a device step equals a host step bit for bit.
//
//   DeviceOptimizer dev(store);                          // a DeviceInitializerStore: device and stream
//   optimizer.set_state_sync([&](auto& states) { dev.sync_to_host(states); });   // checkpoints see it
//   dev.step(optimizer, {{"fc.weight", w_dev, g_dev, n}, ...});   // lr, steps: as optimizer.step()
//   optimizer.load_state(saved);  dev.state_loaded();    // the host state is the truth again
//
// A parameter's device state is made at its first update from the host ParamState (optim::state_tensor:
// zeros, Adagrad's sum initial_accumulator_value, or what load_state put there, checked for size), then
// lives on the device; sync_to_host downloads it into the host ParamStates when a step made it newer.
// Compiled in every build; with CUDA compiled out it cannot be made (a store cannot) and step throws.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "executor/device_initializers.h"
#include "executor/optimizer.h"
#include "graph/error.h"

namespace onnxtrain {

// A parameter to update on the device: its name (the key of its state), weights and gradient, each
// `numel` floats in device memory on the store's device.
struct DeviceParamSlot {
  std::string name;
  float* value = nullptr;
  const float* grad = nullptr;
  int64_t numel = 0;
  float* mirror = nullptr;  // host memory only: also written with the updated value (ParamSlot::mirror)
};

// Calls launch(f) with the update rule's functor f followed by the state arrays its operator() takes,
// taken from `states` (in Optimizer::state_names() order): none for plain SGD, the momentum buffer,
// Adam's two (three with amsgrad) moments, Adagrad's sum. Host logic shared by the CUDA step and the
// CPU tests, which run the same dispatch with a host loop. Throws Error when `states` has too few arrays.
template <typename Launch>
void dispatch_update(const optim::UpdateRule& rule, std::span<float* const> states, Launch&& launch) {
  std::visit(
      [&](const auto& f) {
        optim::call_with_state_arrays<std::decay_t<decltype(f)>>(states,
                                                                 [&](auto*... arrays) { launch(f, arrays...); });
      },
      rule);
}

class DeviceOptimizer {
 public:
  explicit DeviceOptimizer(std::shared_ptr<DeviceInitializerStore> store);
  ~DeviceOptimizer();

  // One step of `optimizer` with every slot on the device: lr = optimizer.current_lr(); each slot's
  // ParamState::step is incremented and then global_step (Optimizer::count_step), as Optimizer::step
  // does. Enqueued on the store's stream; the host does not wait. Throws Error naming the parameter
  // whose state does not fit.
  void step(Optimizer& optimizer, std::span<const DeviceParamSlot> params);

  // fp16 loss scaling on the device: every gradient multiplied in place by the float32 reciprocal of
  // `scale` (LossScaler::unscale's rule, kernels/loss_scale_math.h) and whether all results are finite.
  // Waits for the stream: the answer decides on the host whether the step runs, as GradScaler's
  // found_inf.item() does.
  bool unscale(std::span<const DeviceTensor* const> gradients, double scale);

  // The device state arrays of parameter `param` (numel floats each), in Optimizer::state_names() order,
  // made from the host state first when the device has none (as step would make them): what SpecTrain's
  // prediction reads on the device. Throws Error for a state of another size.
  std::vector<const float*> states_of(Optimizer& optimizer, const std::string& param, int64_t numel);

  // Writes every device state tensor newer than its host copy into `states` (creating the host tensors)
  // and waits for the copies; nothing when the host copies are current.
  void sync_to_host(std::map<std::string, ParamState>& states);
  // The host state was replaced (Optimizer::load_state): the device copies are dropped and made again
  // from the host state at each parameter's next update.
  void state_loaded();

 private:
  // Parameter `param`'s device state arrays in names_ order, made from the host state when missing.
  std::vector<float*> arrays_for(Optimizer& optimizer, const std::string& param, int64_t numel);

  std::shared_ptr<DeviceInitializerStore> store_;            // declared first: its stream outlives the buffers
  std::map<std::string, std::vector<DeviceTensor>> states_;  // per parameter, in state_names() order
  bool host_stale_ = false;                                  // a step ran since the last sync_to_host
  std::vector<std::string> names_;                           // state_names() of the optimizer last stepped
};

}  // namespace onnxtrain
