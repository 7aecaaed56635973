#include "executor/optimizer.h"

#include <algorithm>
#include <cmath>

#include "graph/error.h"

namespace onnxtrain {

namespace {

Error state_error(const std::string& what) { return Error("optimizer state: " + what); }

std::string format(double v) { return std::to_string(v); }

// clip_grad_norm_'s factor for gradients whose squares add up to `sum_of_squares`; 1 when within the limit.
double clip_coefficient(double sum_of_squares, double max_norm) {
  return std::min(1.0, max_norm / (std::sqrt(sum_of_squares) + 1e-6));
}

double squares(std::span<const float> values) {
  double sum = 0;
  for (float v : values) sum += static_cast<double>(v) * v;
  return sum;
}

}  // namespace

void OptimizerConfig::validate() const {
  auto fail = [](const std::string& what) { throw Error("optimizer " + what); };
  if (!(weight_decay >= 0)) fail("weight_decay must be >= 0, got " + format(weight_decay));
  if (kind == OptimizerKind::sgd) {
    if (!(momentum >= 0)) fail("momentum must be >= 0, got " + format(momentum));
    if (nesterov && (momentum <= 0 || dampening != 0))
      fail("nesterov needs momentum > 0 and dampening 0 (as torch.optim.SGD), got momentum " + format(momentum) +
           ", dampening " + format(dampening));
  }
  if (kind == OptimizerKind::adam || kind == OptimizerKind::adamw) {
    if (!(beta1 >= 0 && beta1 < 1)) fail("beta1 must be in [0, 1), got " + format(beta1));
    if (!(beta2 >= 0 && beta2 < 1)) fail("beta2 must be in [0, 1), got " + format(beta2));
  }
  if (!(eps >= 0)) fail("eps must be >= 0, got " + format(eps));
  if (kind == OptimizerKind::adagrad) {
    if (!(lr_decay >= 0)) fail("lr_decay must be >= 0, got " + format(lr_decay));
    if (!(initial_accumulator_value >= 0))
      fail("initial_accumulator_value must be >= 0, got " + format(initial_accumulator_value));
  }
}

void apply_optimizer_name(const std::string& name, OptimizerConfig& config) {
  if (name == "sgd") {
    config.kind = OptimizerKind::sgd;
  } else if (name == "momentum" || name == "nesterov") {
    config.kind = OptimizerKind::sgd;
    if (config.momentum == 0) config.momentum = 0.9;
    config.nesterov = name == "nesterov";
  } else if (name == "adam") {
    config.kind = OptimizerKind::adam;
  } else if (name == "adamw") {
    config.kind = OptimizerKind::adamw;
  } else if (name == "adagrad") {
    config.kind = OptimizerKind::adagrad;
    // torch.optim.Adagrad's eps is 1e-10, Adam's 1e-8 (OptimizerConfig's): `--optimizer adagrad` ran with
    // 1e-8, 0.03 off torch's default in one step of a Linear (an outside check, 2026-12-07).
    if (config.eps == OptimizerConfig{}.eps) config.eps = 1e-10;
  } else {
    throw Error("unknown optimizer '" + name + "' (expected sgd, momentum, nesterov, adam, adamw or adagrad)");
  }
}

const char* optimizer_kind_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::sgd:
      return "sgd";
    case OptimizerKind::adam:
      return "adam";
    case OptimizerKind::adamw:
      return "adamw";
    case OptimizerKind::adagrad:
      return "adagrad";
  }
  return "?";
}

std::span<float> optim::state_tensor(ParamState& s, const std::string& name, size_t numel, float initial) {
  auto it = s.tensors.find(name);
  if (it == s.tensors.end()) {
    Tensor t(DType::Float32, {static_cast<int64_t>(numel)});
    std::fill_n(t.data<float>().data(), numel, initial);
    it = s.tensors.emplace(name, std::move(t)).first;
  }
  if (it->second.dtype() != DType::Float32 || static_cast<size_t>(it->second.numel()) != numel)
    throw state_error("'" + name + "' has " + std::to_string(it->second.numel()) + " elements, the parameter " +
                      std::to_string(numel) + " (expected float32)");
  return it->second.data<float>();
}

optim::UpdateRule optim::update_rule(const OptimizerConfig& c, int64_t count_before, double lr) {
  switch (c.kind) {
    case OptimizerKind::sgd:
      return sgd_rule(c, count_before, lr);
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
      return adam_rule(c, count_before, lr);
    case OptimizerKind::adagrad:
      return adagrad_rule(c, count_before, lr);
  }
  throw Error("optimizer: unknown kind");
}

float optim::initial_state_value(const OptimizerConfig& c, const std::string& name) {
  return c.kind == OptimizerKind::adagrad && name == "sum" ? static_cast<float>(c.initial_accumulator_value) : 0.0f;
}

Optimizer::Optimizer(OptimizerConfig config, LrSchedule schedule) : config_(config), schedule_(schedule) {
  config_.validate();
  schedule_.validate();
}

void Optimizer::step(std::span<const ParamSlot> params) {
  const double lr = current_lr();
  for (const ParamSlot& p : params) {
    try {
      update(p.value, p.grad, states_[p.name], lr, p.grad_scale, p.mirror);
    } catch (Error& e) {
      throw Error("parameter '" + p.name + "': " + e.message());
    }
  }
  ++global_step_;
}

void Optimizer::update(std::span<float> w, std::span<const float> g, ParamState& state, double lr, float grad_scale,
                       std::span<float> mirror) const {
  if (w.size() != g.size())
    throw Error("optimizer update: the gradient has " + std::to_string(g.size()) + " elements, the parameter " +
                std::to_string(w.size()));
  if (!mirror.empty() && mirror.size() != w.size())
    throw Error("optimizer update: the mirror has " + std::to_string(mirror.size()) + " elements, the parameter " +
                std::to_string(w.size()));
  switch (config_.kind) {
    case OptimizerKind::sgd:
      return optim::sgd_update(config_, w, g, state, lr, grad_scale, mirror.empty() ? nullptr : mirror.data());
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
      optim::adam_update(config_, w, g, state, lr, grad_scale);
      break;
    case OptimizerKind::adagrad:
      optim::adagrad_update(config_, w, g, state, lr, grad_scale);
      break;
  }
  if (!mirror.empty()) std::copy(w.begin(), w.end(), mirror.begin());  // the rules without a mirrored loop
}

std::vector<std::string> Optimizer::state_names() const {
  switch (config_.kind) {
    case OptimizerKind::sgd:
      return config_.momentum != 0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{};
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
      if (config_.amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
      return {"exp_avg", "exp_avg_sq"};
    case OptimizerKind::adagrad:
      return {"sum"};
  }
  return {};
}

void Optimizer::sync_state() const {
  if (state_sync_.sync) state_sync_.sync(states_);
}

const std::map<std::string, ParamState>& Optimizer::states() const {
  sync_state();
  return states_;
}

std::map<std::string, Tensor> Optimizer::state_tensors() const {
  sync_state();
  std::map<std::string, Tensor> out;
  out["global_step"] = Tensor::scalar_int64(global_step_);
  for (const auto& [param, s] : states_) {
    out[param + "/step"] = Tensor::scalar_int64(s.step);
    for (const auto& [name, t] : s.tensors) out[param + "/" + name] = t.clone();
  }
  return out;
}

void Optimizer::load_state(const std::map<std::string, Tensor>& saved) {
  const std::vector<std::string> names = state_names();
  std::map<std::string, ParamState> states;
  int64_t global_step = -1;
  for (const auto& [key, t] : saved) {
    if (key == "global_step") {
      if (t.numel() != 1 || t.to_int64().empty()) throw state_error("'global_step' is not an integer scalar");
      global_step = t.to_int64()[0];
      continue;
    }
    const size_t slash = key.rfind('/');
    if (slash == std::string::npos) throw state_error("'" + key + "' is neither global_step nor PARAM/NAME");
    const std::string param = key.substr(0, slash), name = key.substr(slash + 1);
    if (name == "step") {
      if (t.numel() != 1 || !is_integer(t.dtype())) throw state_error("'" + key + "' is not an integer scalar");
      states[param].step = t.to_int64()[0];
    } else if (std::find(names.begin(), names.end(), name) != names.end()) {
      if (t.dtype() != DType::Float32) throw state_error("'" + key + "' is not float32");
      states[param].tensors[name] = t.clone();
    } else {
      std::string expected;
      for (const std::string& n : names) expected += (expected.empty() ? "" : ", ") + n;
      throw state_error("'" + key + "' is not a state of " + optimizer_kind_name(config_.kind) + " (expected step" +
                        (expected.empty() ? "" : ", " + expected) + ")");
    }
  }
  if (global_step < 0) throw state_error("'global_step' is missing");
  for (const auto& [param, s] : states) {
    if (!saved.contains(param + "/step")) throw state_error("'" + param + "/step' is missing");
    if (s.step > 0)
      for (const std::string& n : names)
        if (!s.tensors.contains(n)) throw state_error("'" + param + "/" + n + "' is missing");
  }
  global_step_ = global_step;
  states_ = std::move(states);
}

void clip_gradient_norm(std::vector<ParamSlot>& params, double max_norm, std::vector<std::vector<float>>& storage) {
  double sum_of_squares = 0;
  for (const ParamSlot& p : params) sum_of_squares += squares(p.grad);
  const double coefficient = clip_coefficient(sum_of_squares, max_norm);
  if (coefficient >= 1) return;
  storage.resize(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    storage[i].resize(params[i].grad.size());
    for (size_t k = 0; k < storage[i].size(); ++k) storage[i][k] = static_cast<float>(params[i].grad[k] * coefficient);
    params[i].grad = storage[i];
  }
}

void clip_gradient_norm(std::map<std::string, Tensor>& gradients, double max_norm) {
  double sum_of_squares = 0;
  for (const auto& [name, g] : gradients) sum_of_squares += squares(g.data<float>());
  const double coefficient = clip_coefficient(sum_of_squares, max_norm);
  if (coefficient >= 1) return;
  for (auto& [name, g] : gradients)
    for (float& v : g.data<float>()) v = static_cast<float>(v * coefficient);
}

}  // namespace onnxtrain
