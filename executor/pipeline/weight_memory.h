// Where a pipeline stage's weight arrays live (weight_policy.h: the master weights, PipeDream's stashes
// and version history, gpipe's gradient sum) and the copies and elementwise work on them: host memory
// with loops, or, for a stage on a GPU, device memory on its DeviceInitializerStore's stream with
// kernels and device copies, no host wait. There the working weights the stage's sessions read are the
// store's device copies, written in place, and the optimizer steps through DeviceOptimizer, so a stage's
// update, stash and version switch never leave the device. The policy's decisions (which version a pass
// reads, what is stashed) are the same code for both.
//
//   WeightMemory memory(store);                    // or WeightMemory() for the host
//   WeightArray w = memory.make(n);
//   memory.copy(w.data(), memory.working("fc.weight", tensor), n);
//   memory.step(optimizer, {{"fc.weight", w.data(), grad, n}});   // grad in the same memory
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "executor/device_initializers.h"
#include "executor/device_optimizer.h"
#include "executor/optimizer.h"
#include "graph/tensor.h"

namespace onnxtrain {

// A flat float array in a WeightMemory: a host vector, or a device buffer.
struct WeightArray {
  std::vector<float> host;
  cuda::DeviceBuffer device;
  size_t size = 0;
  float* data() { return device.data() ? static_cast<float*>(device.data()) : host.data(); }
  const float* data() const { return device.data() ? static_cast<const float*>(device.data()) : host.data(); }
};

class WeightMemory {
 public:
  WeightMemory() = default;  // host memory
  // Device memory on `store`'s device and stream (null: host memory).
  explicit WeightMemory(std::shared_ptr<DeviceInitializerStore> store);
  ~WeightMemory();
  WeightMemory(WeightMemory&&) noexcept;

  bool on_device() const { return store_ != nullptr; }
  WeightArray make(size_t n) const;
  void copy(float* dst, const float* src, size_t n) const;
  void accumulate(float* acc, const float* g, size_t n, float weight, bool first) const;  // weight_math.h
  void scale(float* v, size_t n, float s) const;
  // Host values into this memory, and back: on a device the download waits for the stream unless `wait`
  // is false (then call wait() before reading `dst`; several downloads, one wait).
  void upload(float* dst, std::span<const float> src) const;
  void download(std::span<float> dst, const float* src, bool wait = true) const;
  void wait() const;
  // The working weights of parameter `name`, whose host Tensor (the one the stage's graphs hold) is
  // `host`: its data for writing, in this memory (on a device, the store's copy, uploaded first if the
  // store has none yet; the host Tensor is stale until sync_working_to_host).
  float* working(const std::string& name, const Tensor& host) const;
  // After the working weights were written on the device: the host Tensors get the values (evaluation,
  // export). Nothing on the host.
  void sync_working_to_host() const;
  // One optimizer step with weights and gradients in this memory (lr, steps: as Optimizer::step).
  // `grad_scale` multiplies the gradients as the update reads them (host memory; 1 on a device and where
  // step() shows the gradients to the predictor: scale_in_step says).
  void step(Optimizer& optimizer, std::span<const DeviceParamSlot> params, float grad_scale = 1.0f);
  bool scales_in_step() const { return !store_ && !keep_averages_; }
  // SpecTrain (executor/weight_prediction.h): from now on, step() shows every gradient to the predictor
  // first, which keeps its own average of them when `optimizer`'s state holds no gradient estimate.
  void enable_prediction(const Optimizer& optimizer);
  // out = Ŵ(s) for parameter `param` (n floats; out and w in this memory): s applications of the
  // optimizer's update rule to scratch copies of w and its state (on a device the device optimizer's
  // arrays, so nothing is downloaded). Ŵ = W before the first update (no estimate yet) and for s = 0.
  void predict(Optimizer& optimizer, const std::string& param, float* out, const float* w, size_t n, int64_t s);
  // Bytes of the predictor's kept averages (one float per weight; none for the state-derived estimates).
  int64_t prediction_bytes() const;
  // The kept averages for a checkpoint ("PARAM/average" float32, "PARAM/observed" int64 scalar), and
  // back: load_prediction_state replaces them by the entries of `saved` for the parameters given (name,
  // size); a parameter with none starts its average again.
  std::map<std::string, Tensor> prediction_state() const;
  void load_prediction_state(const std::map<std::string, Tensor>& saved,
                             const std::vector<std::pair<std::string, size_t>>& parameters);
  // Optimizer state on the device: the host ParamStates get it (Optimizer::set_state_sync), or are made
  // the truth again after Optimizer::load_state. Nothing for host memory.
  void sync_state(std::map<std::string, ParamState>& states);
  void state_loaded();

 private:
  void observe_gradient(const std::string& param, const float* g, size_t n);

  std::shared_ptr<DeviceInitializerStore> store_;
  std::unique_ptr<DeviceOptimizer> device_optimizer_;
  // SpecTrain's kept averages (GradientEstimate::kept_average), by parameter.
  bool keep_averages_ = false;
  float average_beta_ = 0;
  struct KeptAverage {
    WeightArray average;
    int64_t observed = 0;
  };
  std::map<std::string, KeptAverage> averages_;
};

}  // namespace onnxtrain
