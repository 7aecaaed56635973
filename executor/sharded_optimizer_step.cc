#include "executor/sharded_optimizer_step.h"

#include <variant>

namespace onnxtrain {

void ShardedOptimizerStep::prepare(Optimizer& optimizer, const std::vector<std::pair<std::string, size_t>>& params) {
  const OptimizerConfig& config = optimizer.config();
  const std::vector<std::string> names = optimizer.state_names();
  const double lr = optimizer.current_lr();
  params_.clear();
  params_.reserve(params.size());
  for (const auto& [name, numel] : params) {
    ParamState& state = optimizer.state(name);
    Param p{.name = name, .rule = optim::update_rule(config, state.step, lr), .states = {}};
    try {
      for (const std::string& s : names)
        p.states.push_back(optim::state_tensor(state, s, numel, optim::initial_state_value(config, s)).data());
    } catch (Error& e) {
      throw Error("parameter '" + name + "': " + e.message());
    }
    params_.push_back(std::move(p));
  }
}

void ShardedOptimizerStep::apply(size_t index, size_t begin, size_t end, float* __restrict w,
                                 const float* __restrict g) const {
  const Param& p = params_.at(index);
  const size_t n = end - begin;
  std::visit(
      [&](const auto& rule) {
        using Rule = std::decay_t<decltype(rule)>;
        const Rule f = rule;  // a local copy: the stores below cannot alias its fields, which stay in registers
        optim::call_with_state_arrays<Rule>(std::span<float* const>(p.states), [&](auto*... state) {
#pragma omp simd
          for (size_t i = 0; i < n; ++i) f(w[i], g[i], state[begin + i]...);
        });
      },
      p.rule);
}

void ShardedOptimizerStep::apply_sum_of_two(size_t index, size_t begin, size_t end, float* __restrict w,
                                            const float* __restrict g0, float w0, const float* __restrict g1,
                                            float w1) const {
  const Param& p = params_.at(index);
  const size_t n = end - begin;
  std::visit(
      [&](const auto& rule) {
        using Rule = std::decay_t<decltype(rule)>;
        const Rule f = rule;
        optim::call_with_state_arrays<Rule>(std::span<float* const>(p.states), [&](auto*... state) {
#pragma omp simd
          for (size_t i = 0; i < n; ++i) {
            float g = g0[i] * w0;
            g += g1[i] * w1;
            f(w[i], g, state[begin + i]...);
          }
        });
      },
      p.rule);
}

void ShardedOptimizerStep::finish(Optimizer& optimizer) {
  for (const Param& p : params_) ++optimizer.state(p.name).step;
  optimizer.count_step();
}

}  // namespace onnxtrain
