// Optimizers: per-parameter state + an update rule with torch.optim's semantics (PyTorch 1.13,
// single-tensor loops), applied by the executor to each parameter tensor after its gradient is ready.
// The same update code runs ONNX's ai.onnx.preview.training Momentum / Adam / Adagrad ops (see the
// mapping below and tests/optimizer_test.cc).
//
//   sgd       SGD(lr, momentum, dampening, nesterov, weight_decay)   state: momentum_buffer (momentum > 0)
//   adam      Adam(lr, betas, eps, weight_decay, amsgrad)            state: exp_avg, exp_avg_sq[, max_exp_avg_sq]
//   adamw     AdamW: Adam with decoupled decay w ← w·(1 − lr·wd)     state: as adam
//   adagrad   Adagrad(lr, lr_decay, weight_decay, initial_accumulator_value, eps)   state: sum
// weight_decay is L2 (wd·w added to the gradient) except for adamw. Every parameter's state also
// counts its updates (`ParamState::step`, torch's state['step']); state tensors are float32, created
// lazily (zeros; Adagrad's sum: initial_accumulator_value) at the parameter's first update.
//
// Usage, one optimizer per set of parameters (a stage), one `step` per mini-batch:
//   Optimizer opt({.kind = OptimizerKind::sgd, .momentum = 0.9}, {.kind = LrScheduleKind::cosine,
//                  .base_lr = 0.1, .t_max = steps});
//   opt.step({{"fc.weight", w_span, g_span}, {"fc.bias", b_span, gb_span}});   // lr = schedule(global_step)
//   std::map<std::string, Tensor> saved = opt.state_tensors();  ...  opt.load_state(saved);
// Low level (ONNX ops, stage programs with their own bookkeeping): opt.update(w, g, state, lr).
//
// On a GPU (executor/device_optimizer.h) the same rules run as CUDA kernels: `optim::update_rule` gives
// the per-element functor of one update (the very functor the host loops below run), the host Optimizer
// keeps the schedule, global_step and every ParamState::step, and the state tensors live in device
// memory; `set_state_sync` lets states() and state_tensors() download them first, so a checkpoint
// always sees the current state.
//
// SpecTrain's weight prediction runs these update rules ahead on scratch copies: executor/weight_prediction.h.
//
// ONNX ai.onnx.preview.training mapping (inputs R = lr, T = the parameter's update count = state.step):
//   Momentum(alpha, beta, mode, norm_coefficient) = sgd{momentum = alpha, dampening = 1 − beta,
//     nesterov = mode == "nesterov", weight_decay = norm_coefficient}, V = momentum_buffer. ONNX uses
//     beta = 1 on its first update (T = 0), as torch, whose first update sets the buffer to the gradient:
//     here the first update (state.step == 0) weighs the gradient by 1, the later ones by 1 − dampening.
//   Adagrad(decay_factor, epsilon, norm_coefficient) = adagrad{lr_decay, eps, weight_decay}, H = sum.
//   Adam(alpha, beta, epsilon, norm_coefficient, norm_coefficient_post) = adam{beta1 = alpha,
//     beta2 = beta, eps, weight_decay = norm_coefficient, convention = AdamConvention::onnx,
//     post_update_decay = norm_coefficient_post}, V = exp_avg, H = exp_avg_sq. The onnx convention
//     differs from torch's in three ways, all options of the one Adam update: eps is added to √H before
//     the bias correction (w −= lr·√(1−β2^T)/(1−β1^T) · m/(√H + eps)), the correction's exponent is the
//     count before the update (T; none when T = 0) and the decoupled decay comes after the update
//     (w ← (1 − post_update_decay)·w).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "executor/lr_schedule.h"
#include "graph/error.h"
#include "graph/tensor.h"
#include "kernels/optimizer_math.h"

namespace onnxtrain {

enum class OptimizerKind { sgd, adam, adamw, adagrad };
enum class AdamConvention { torch, onnx };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::sgd;
  double weight_decay = 0;  // L2 for sgd, adam, adagrad; decoupled for adamw
  // sgd
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
  // adam, adamw
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;  // adagrad too (torch's Adagrad default is 1e-10: apply_optimizer_name sets it)
  bool amsgrad = false;
  AdamConvention convention = AdamConvention::torch;
  double post_update_decay = 0;  // onnx convention: w ← (1 − c)·w after the update
  // adagrad
  double lr_decay = 0;
  double initial_accumulator_value = 0;

  // Throws Error on values torch refuses (negative lr-independent fields, betas outside [0, 1),
  // nesterov without momentum or with dampening, ...).
  void validate() const;
  // True when an element whose gradient is zero at every step keeps its value (and its state stays at its
  // start): no weight decay of either kind. Every kind here updates elementwise from the gradient alone.
  bool keeps_untouched_elements() const { return weight_decay == 0 && post_update_decay == 0; }
};

// The command-line names: "sgd", "momentum" (sgd, momentum 0.9 unless given), "nesterov", "adam",
// "adamw", "adagrad" (eps 1e-10 unless given, torch's default). Fills `config.kind` (and momentum, nesterov,
// adagrad's eps); throws Error listing the names.
void apply_optimizer_name(const std::string& name, OptimizerConfig& config);
const char* optimizer_kind_name(OptimizerKind kind);

// One parameter's optimizer state: its update count and named float32 tensors (torch's state names).
struct ParamState {
  int64_t step = 0;
  std::map<std::string, Tensor> tensors;

  std::span<float> tensor(const std::string& name) { return tensors.at(name).data<float>(); }
  std::span<const float> tensor(const std::string& name) const { return tensors.at(name).data<float>(); }
};

// A parameter to update: its name (the key of its state), value and gradient (same element count).
// `grad_scale` multiplies each gradient element as the update reads it (a pipeline's gradient sum over M
// micro-batches times 1/M: the same float products as scaling the sum first, without that pass).
// `mirror`, when given (value's size), gets the updated value too: a pipeline stage's working weights, the
// copy of W its passes read, written in the update's pass over W (momentum SGD) instead of a copy of its own.
struct ParamSlot {
  std::string name;
  std::span<float> value;
  std::span<const float> grad;
  float grad_scale = 1.0f;
  std::span<float> mirror = {};
};

// torch.nn.utils.clip_grad_norm_: when the gradients' total 2-norm (over every one together) exceeds
// `max_norm`, each is scaled by max_norm / (norm + 1e-6). The slot version points each slot's grad at a
// scaled copy kept in `storage` (the caller's gradients stay as they were); the map version scales the
// tensors in place.
void clip_gradient_norm(std::vector<ParamSlot>& params, double max_norm, std::vector<std::vector<float>>& storage);
void clip_gradient_norm(std::map<std::string, Tensor>& gradients, double max_norm);

class Optimizer {
 public:
  explicit Optimizer(OptimizerConfig config, LrSchedule schedule = {});

  const OptimizerConfig& config() const { return config_; }
  const LrSchedule& schedule() const { return schedule_; }
  int64_t global_step() const { return global_step_; }
  double current_lr() const { return schedule_.lr_at(global_step_); }

  // One optimizer step: updates every slot with lr = schedule(global_step), then global_step += 1.
  void step(std::span<const ParamSlot> params);
  void step(std::initializer_list<ParamSlot> params) {
    step(std::span<const ParamSlot>(params.begin(), params.size()));
  }

  // One update of one tensor with an explicit state and learning rate (creates missing state tensors,
  // increments state.step). Throws Error when sizes of w, g and the state tensors disagree.
  void update(std::span<float> w, std::span<const float> g, ParamState& state, double lr, float grad_scale = 1.0f,
              std::span<float> mirror = {}) const;

  // The state tensors each parameter gets, in order ("momentum_buffer"; "exp_avg", "exp_avg_sq"
  // [, "max_exp_avg_sq"]; "sum"; none for plain sgd).
  std::vector<std::string> state_names() const;

  // The host copies (no state sync: the device optimizer's own bookkeeping uses this).
  ParamState& state(const std::string& param) { return states_[param]; }
  // Every parameter's state, after the state sync (see set_state_sync).
  const std::map<std::string, ParamState>& states() const;

  // Everything a checkpoint needs: "global_step" (int64 scalar), "PARAM/step" (int64 scalar) and
  // "PARAM/NAME" (float32) per parameter that has state (after the state sync).
  std::map<std::string, Tensor> state_tensors() const;
  // The inverse; replaces all state. Throws Error naming the entry that is not a state of this
  // optimizer, has the wrong dtype, or lacks its step.
  void load_state(const std::map<std::string, Tensor>& saved);

  // For updates that run elsewhere (executor/device_optimizer.h): counts one step, as step() does after
  // updating every slot (the caller incremented each updated ParamState::step).
  void count_step() { ++global_step_; }
  // Called with the host states before states() and state_tensors() read them, to write the current
  // state tensors into them (a device optimizer downloads its newer copies). Empty by default; a copy
  // of the Optimizer starts without it (it belongs to the owner that set it), a move keeps it.
  using StateSync = std::function<void(std::map<std::string, ParamState>& states)>;
  void set_state_sync(StateSync sync) { state_sync_.sync = std::move(sync); }

 private:
  struct OwnedStateSync {  // a copy of an Optimizer starts without one; a move takes it along
    StateSync sync;
    OwnedStateSync() = default;
    OwnedStateSync(const OwnedStateSync&) {}
    OwnedStateSync& operator=(const OwnedStateSync&) { return *this; }
    OwnedStateSync(OwnedStateSync&&) noexcept = default;
    OwnedStateSync& operator=(OwnedStateSync&&) noexcept = default;
  };
  void sync_state() const;

  OptimizerConfig config_;
  LrSchedule schedule_;
  int64_t global_step_ = 0;
  mutable std::map<std::string, ParamState> states_;  // mutable: the state sync refreshes the host copies
  OwnedStateSync state_sync_;
};

// The update rules, one file each under executor/optim/; `Optimizer` dispatches on config.kind.
namespace optim {
// The per-element functor of one update of a parameter that has had `count_before` updates, at
// learning rate lr: the one the host loops below run, and the CUDA kernels (kernels/cuda/
// optimizer_update.h) on a device. Adam's functor takes max_exp_avg_sq too when config.amsgrad.
using UpdateRule =
    std::variant<optimizer_math::SgdUpdate, optimizer_math::SgdMomentumUpdate, optimizer_math::SgdNesterovUpdate,
                 optimizer_math::AdamUpdate, optimizer_math::AdagradUpdate>;
UpdateRule update_rule(const OptimizerConfig& c, int64_t count_before, double lr);
UpdateRule sgd_rule(const OptimizerConfig& c, int64_t count_before, double lr);
UpdateRule adam_rule(const OptimizerConfig& c, int64_t count_before, double lr);
UpdateRule adagrad_rule(const OptimizerConfig& c, int64_t count_before, double lr);
// Calls call(states[0], …) with the state arrays an update rule of type Rule reads, in state_names()
// order: none for plain SGD, the momentum buffer, Adam's two moments (three when `states` has
// max_exp_avg_sq), Adagrad's sum. Throws Error when `states` has too few.
template <typename Rule, typename T, typename Call>
void call_with_state_arrays(std::span<T* const> states, Call&& call) {
  auto need = [&](size_t n) {
    if (states.size() < n)
      throw Error("optimizer: the update needs " + std::to_string(n) + " state arrays, got " +
                  std::to_string(states.size()));
  };
  if constexpr (std::is_same_v<Rule, optimizer_math::SgdUpdate>) {
    call();
  } else if constexpr (std::is_same_v<Rule, optimizer_math::AdamUpdate>) {
    need(2);
    if (states.size() >= 3)
      call(states[0], states[1], states[2]);
    else
      call(states[0], states[1]);
  } else {
    need(1);
    call(states[0]);
  }
}
// The value every element of state tensor `name` starts at (Adagrad's sum: initial_accumulator_value).
float initial_state_value(const OptimizerConfig& c, const std::string& name);
// The state tensor `name` of s, created with `numel` elements set to `initial` when missing; throws Error
// when an existing (loaded) one has another element count.
std::span<float> state_tensor(ParamState& s, const std::string& name, size_t numel, float initial = 0.0f);
void sgd_update(const OptimizerConfig& c, std::span<float> w, std::span<const float> g, ParamState& s, double lr,
                float grad_scale = 1.0f, float* mirror = nullptr);
void adam_update(const OptimizerConfig& c, std::span<float> w, std::span<const float> g, ParamState& s, double lr,
                 float grad_scale = 1.0f);
void adagrad_update(const OptimizerConfig& c, std::span<float> w, std::span<const float> g, ParamState& s, double lr,
                    float grad_scale = 1.0f);
}  // namespace optim

}  // namespace onnxtrain
