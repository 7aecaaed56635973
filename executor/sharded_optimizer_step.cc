#include "executor/sharded_optimizer_step.h"

#include <algorithm>
#include <array>
#include <utility>
#include <variant>

#include "graph/error.h"

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

// One replica's gradient at weight 1: the sum's loop with g·1, which is g itself.
void ShardedOptimizerStep::apply(size_t index, size_t begin, size_t end, float* w, const float* g) const {
  const std::array<const float*, 1> gradients{g};
  const std::array<double, 1> unit{1.0};
  apply_sum(index, begin, end, w, gradients, unit);
}

namespace {

// w[i] updated by `f` with Σ_k g[k][i]·weight[k] over R replicas, each product rounded to float. Weight:
// float where every row weight is one, else double (the same bits for those that are floats: is_a_float).
template <size_t R, typename Weight, typename Rule, typename... State>
void update_with_sum(const Rule& f, size_t n, size_t begin, float* __restrict w, const std::array<const float*, R>& g,
                     const std::array<Weight, R>& weight, State*... state) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) {
    auto sum = static_cast<float>(g[0][i] * weight[0]);
    for (size_t k = 1; k < R; ++k) sum += static_cast<float>(g[k][i] * weight[k]);
    f(w[i], sum, state[begin + i]...);
  }
}

}  // namespace

void ShardedOptimizerStep::apply_sum(size_t index, size_t begin, size_t end, float* __restrict w,
                                     std::span<const float* const> gradients,
                                     std::span<const double> row_weights) const {
  ONNXTRAIN_CHECK(
      gradients.size() == row_weights.size() && !gradients.empty() && gradients.size() <= kMaxReplicasInPass,
      "sharded optimizer step: 1 to " + std::to_string(kMaxReplicasInPass) +
          " replicas' gradients, one row weight each");
  const Param& p = params_.at(index);
  const size_t n = end - begin;
  const bool floats = std::all_of(row_weights.begin(), row_weights.end(), is_a_float);
  const auto with_replicas = [&]<size_t R>() {
    std::array<const float*, R> g{};
    std::copy_n(gradients.begin(), R, g.begin());
    const auto run = [&](const auto& weight) {
      std::visit(
          [&](const auto& rule) {
            using Rule = std::decay_t<decltype(rule)>;
            const Rule f = rule;  // a local copy: the stores below cannot alias its fields
            optim::call_with_state_arrays<Rule>(std::span<float* const>(p.states), [&](auto*... state) {
              update_with_sum(f, n, begin, w, g, weight, state...);
            });
          },
          p.rule);
    };
    if (floats) {
      std::array<float, R> weight{};
      for (size_t k = 0; k < R; ++k) weight[k] = static_cast<float>(row_weights[k]);
      run(weight);
    } else {
      std::array<double, R> weight{};
      std::copy_n(row_weights.begin(), R, weight.begin());
      run(weight);
    }
  };
  // with_replicas<R> for R = gradients.size(): one unrolled loop per count from 1 to kMaxReplicasInPass.
  [&]<size_t... Extra>(std::index_sequence<Extra...>) {
    ((gradients.size() == Extra + 1 ? (with_replicas.template operator()<Extra + 1>(), true) : false) || ...);
  }
  (std::make_index_sequence<kMaxReplicasInPass>());
}

void ShardedOptimizerStep::finish(Optimizer& optimizer) {
  for (const Param& p : params_) ++optimizer.state(p.name).step;
  optimizer.count_step();
}

}  // namespace onnxtrain
