// The state behind GradientContext while a training graph is built (internal to graph/autodiff/).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "graph/autodiff/gradient_rule.h"
#include "graph/autodiff/training_graph.h"

namespace onnxtrain {

class TrainingGraphBuilder {
 public:
  explicit TrainingGraphBuilder(TrainingGraph& result) : result_(result) {}

  Graph& graph() { return result_.graph; }
  bool requires_grad(ValueId v) const {
    return v.valid() && v.index < requires_grad_.size() && requires_grad_[v.index];
  }
  void mark_requires_grad(ValueId v);
  bool differentiable_input(const Node& node, size_t i) const;

  void add_contribution(ValueId v, ValueId grad);
  // The sum of every contribution to `v` (one Sum node when there are several); invalid when none.
  ValueId gradient_of(ValueId v);
  // The contributions to `v`'s gradient unsummed when there are exactly two (a rule that adds them in
  // its own pass: add_relu.h), else {gradient_of(v)}; either way the gradient is then final.
  std::vector<ValueId> gradient_parts_of(ValueId v);
  // The contributions `parts` to v's gradient as one Concat when they are GatherGrads of each slice of an
  // axis once (gathered_slices.cc); invalid (nothing emitted) otherwise.
  ValueId concat_of_gathered_slices(NodeId owner, ValueId v, const std::vector<ValueId>& parts);

  std::vector<ValueId> emit(NodeId for_node, const std::string& op_type, const std::string& domain,
                            std::vector<ValueId> inputs, Attributes attributes, std::vector<bool> outputs);
  ValueId add_constant(Tensor tensor, const std::string& hint);
  std::string unique_name(const std::string& base);

 private:
  TrainingGraph& result_;
  std::vector<bool> requires_grad_;
  std::vector<std::vector<ValueId>> contributions_;
  std::vector<bool> summed_;
  std::set<std::string> names_;
  bool names_loaded_ = false;
};

}  // namespace onnxtrain
