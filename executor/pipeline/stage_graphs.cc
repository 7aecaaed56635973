#include "executor/pipeline/stage_graphs.h"

#include <algorithm>
#include <map>
#include <set>

#include "graph/error.h"
#include "partitioner/cost_model.h"

namespace onnxtrain {
namespace {

enum Phase { kForward = 0, kBackward = 1 };

std::string node_label(const Node& n) { return "node '" + n.name + "' (" + n.op_type + ")"; }

// What crosses each boundary, as value indices (ordered, so that sender and receiver list the same
// names in the same order: the comm tag index).
struct Routes {
  std::vector<std::set<uint32_t>> forward_send;   // [m]: sent by stage m's forward graph to stage m+1
  std::vector<std::set<uint32_t>> backward_send;  // [m]: sent by stage m's backward graph to stage m-1
  std::vector<std::set<uint32_t>> kept;           // [m]: forward-graph outputs read by stage m's backward graph
};

// Copies nodes of `g` into a new graph: values are imported by id on first use (initializers sharing
// their Tensors; graph inputs declared beforehand), node outputs created as the nodes are added, in
// the training graph's order, so the sub-graph runs its nodes in the order the whole graph does.
class SubgraphBuilder {
 public:
  explicit SubgraphBuilder(const Graph& g) : g_(g) { sub_.info = g.info; }

  void add_input(ValueId v) {
    ONNXTRAIN_CHECK(!remap_.contains(v.index), "stage graph input '" + g_.value(v).name + "' declared twice");
    Value copy = g_.value(v);
    copy.producer = NodeId{};
    if (copy.role == ValueRole::Activation) copy.role = ValueRole::Input;  // received, not made here
    ValueId id = sub_.add_value(std::move(copy));
    remap_[v.index] = id;
    sub_.inputs.push_back(id);
  }

  ValueId use(ValueId v, const std::string& reader) {
    auto it = remap_.find(v.index);
    if (it != remap_.end()) return it->second;
    const Value& value = g_.value(v);
    ONNXTRAIN_CHECK(value.data && !value.producer.valid(),
                    reader + " reads '" + value.name + "', which the stage neither makes nor receives");
    ValueId id = sub_.add_value(value);  // shares the Tensor: the parameters stay one set of buffers
    remap_[v.index] = id;
    sub_.initializers.push_back(id);
    return id;
  }

  void add_node(const Node& node) {
    Node copy = node;
    for (ValueId& in : copy.inputs)
      if (in.valid()) in = use(in, node_label(node));
    for (ValueId& out : copy.outputs) {
      if (!out.valid()) continue;
      ONNXTRAIN_CHECK(!remap_.contains(out.index), "value '" + g_.value(out).name + "' made twice in one stage graph");
      Value value = g_.value(out);
      value.producer = NodeId{};
      const ValueId id = sub_.add_value(std::move(value));
      remap_[out.index] = id;
      out = id;
    }
    sub_.add_node(std::move(copy));
  }

  // An output no node makes (a constant gradient) is an initializer of the stage graph.
  void add_output(ValueId v) {
    const ValueId id = use(v, "the stage graph's output list");
    if (std::find(sub_.outputs.begin(), sub_.outputs.end(), id) == sub_.outputs.end()) sub_.outputs.push_back(id);
  }

  Graph take() { return std::move(sub_); }

 private:
  const Graph& g_;
  Graph sub_;
  std::map<uint32_t, ValueId> remap_;
};

std::vector<std::string> names_of(const Graph& g, const std::set<uint32_t>& ids) {
  std::vector<std::string> names;
  for (uint32_t i : ids) names.push_back(g.value(ValueId{i}).name);
  return names;
}

}  // namespace

std::vector<StageGraphs> split_training_graph(const TrainingGraph& training, std::span<const int64_t> stage_starts) {
  const Graph& g = training.graph;
  const std::vector<NodeId>& order = g.order();
  const auto forward_count = static_cast<int64_t>(training.forward_node_count);

  // Stage boundaries.
  auto starts_text = [&] {
    std::string s;
    for (int64_t v : stage_starts) s += (s.empty() ? "" : ", ") + std::to_string(v);
    return "[" + s + "]";
  };
  if (stage_starts.empty()) throw Error("stage_starts is empty: a pipeline needs at least one stage");
  if (stage_starts[0] != 0) {
    throw Error("stage_starts " + starts_text() +
                " must begin with 0 (the first stage starts at the first forward node)");
  }
  for (size_t s = 1; s < stage_starts.size(); ++s) {
    if (stage_starts[s] <= stage_starts[s - 1]) {
      throw Error("stage_starts " + starts_text() + " must be strictly increasing: stage " + std::to_string(s) +
                  " would be empty");
    }
  }
  if (stage_starts.back() >= forward_count) {
    throw Error("stage_starts " + starts_text() + ": the model has " + std::to_string(forward_count) +
                " forward nodes, so the last stage (from node " + std::to_string(stage_starts.back()) +
                ") would be empty");
  }
  const int stages = static_cast<int>(stage_starts.size());
  auto stage_of_forward = [&](size_t i) {
    auto after = std::upper_bound(stage_starts.begin(), stage_starts.end(), static_cast<int64_t>(i));
    return static_cast<int>(after - stage_starts.begin()) - 1;
  };

  // Every node's stage and phase.
  const std::vector<size_t> owner = owning_forward_node(training);
  std::vector<int> node_stage(order.size());
  std::vector<Phase> node_phase(order.size());
  std::map<uint32_t, size_t> position_of;  // node index -> place in the order
  for (size_t i = 0; i < order.size(); ++i) {
    node_stage[i] = stage_of_forward(owner[i]);
    node_phase[i] = static_cast<int64_t>(i) < forward_count ? kForward : kBackward;
    position_of[order[i].index] = i;
  }

  std::vector<bool> is_graph_input(g.value_count(), false);
  for (ValueId v : g.inputs) is_graph_input[v.index] = true;

  // Who reads each value; initializers: which stages read them (tied weights are refused below).
  Routes routes{std::vector<std::set<uint32_t>>(stages), std::vector<std::set<uint32_t>>(stages),
                std::vector<std::set<uint32_t>>(stages)};
  std::vector<std::set<uint32_t>> data_inputs_read(stages * 2);  // [stage*2 + phase]
  std::map<uint32_t, std::set<int>> initializer_stages;

  // Moves value v from where it is made to (stage k, phase q), marking every boundary it crosses. The
  // stages run forward 0..N-1, then backward N-1..0; a forward value reaches a stage's backward graph
  // through that stage's own forward graph (kept), never through a message.
  auto route = [&](ValueId v, int k, Phase q, const std::string& reader) {
    const Value& value = g.value(v);
    if (is_graph_input[v.index]) {
      data_inputs_read[k * 2 + q].insert(v.index);
      return;
    }
    if (!value.producer.valid()) {
      if (value.data) {
        initializer_stages[v.index].insert(k);
        return;
      }
      ONNXTRAIN_CHECK(false, reader + " reads '" + value.name + "', which nothing makes");
    }
    const size_t p = position_of.at(value.producer.index);
    const int j = node_stage[p];
    const Phase made = node_phase[p];
    if (made == kForward && q == kForward) {
      ONNXTRAIN_CHECK(j <= k, reader + " reads '" + value.name + "', made by a later forward node");
      for (int m = j; m < k; ++m) routes.forward_send[m].insert(v.index);
    } else if (made == kForward && q == kBackward) {
      if (j <= k) {  // forward along the pipeline to stage k, kept there
        for (int m = j; m < k; ++m) routes.forward_send[m].insert(v.index);
        routes.kept[k].insert(v.index);
      } else {  // kept where it is made, then back with the gradients
        routes.kept[j].insert(v.index);
        for (int m = j; m > k; --m) routes.backward_send[m].insert(v.index);
      }
    } else if (made == kBackward && q == kBackward) {
      if (j < k) {
        throw Error(reader + " of stage " + std::to_string(k) + " reads '" + value.name +
                    "', which the backward pass of the earlier stage " + std::to_string(j) +
                    " makes after it: these stage boundaries cut a backward dependency the pipeline cannot honour");
      }
      for (int m = j; m > k; --m) routes.backward_send[m].insert(v.index);
    } else {
      ONNXTRAIN_CHECK(false, reader + " (forward) reads the backward value '" + value.name + "'");
    }
  };

  for (size_t i = 0; i < order.size(); ++i) {
    const Node& node = g.node(order[i]);
    for (ValueId in : node.inputs)
      if (in.valid()) route(in, node_stage[i], node_phase[i], node_label(node));
  }

  // Tied weights: a trained tensor (a parameter with a gradient) or running statistic is updated where
  // it lives, so exactly one stage may read it. Frozen parameters, buffers and constants are shared.
  const std::vector<bool> one_stage = lives_on_one_stage(training);
  for (const auto& [index, readers] : initializer_stages) {
    const Value& v = g.value(ValueId{index});
    if (!one_stage[index] || readers.size() < 2) continue;
    std::string list;
    for (int s : readers) list += (list.empty() ? "" : ", ") + std::to_string(s);
    throw Error(std::string(v.role == ValueRole::State ? "running statistic" : "parameter") + " '" + v.name +
                "' is read by stages " + list +
                " (tied weights): each trained tensor must belong to one stage; "
                "choose stage boundaries that keep all the nodes reading it in one stage");
  }

  // Parameters (those the Trainer updates: initializers with a float gradient), their stage, and the
  // gradient each stage's backward graph must output.
  std::vector<std::vector<std::pair<ValueId, ValueId>>> stage_parameters(stages);
  for (const TrainingGraph::Gradient& grad : training.gradients) {
    const Value& v = g.value(grad.value);
    if (!v.data || v.dtype != DType::Float32) continue;
    auto it = initializer_stages.find(grad.value.index);
    ONNXTRAIN_CHECK(it != initializer_stages.end(), "parameter '" + v.name + "' has a gradient but no node reads it");
    const int k = *it->second.begin();
    stage_parameters[k].emplace_back(grad.value, grad.gradient);
    route(grad.gradient, k, kBackward, "the gradient output of parameter '" + v.name + "'");
  }

  // Training-graph outputs (loss, model outputs, BN running statistics, gradients) come out of the
  // graph that makes them.
  std::vector<std::vector<ValueId>> made_outputs(stages * 2);
  for (ValueId out : g.outputs) {
    const Value& v = g.value(out);
    if (!v.producer.valid()) continue;
    const size_t p = position_of.at(v.producer.index);
    made_outputs[node_stage[p] * 2 + node_phase[p]].push_back(out);
  }

  std::vector<StageGraphs> result(stages);
  for (int k = 0; k < stages; ++k) {
    StageGraphs& s = result[k];
    s.index = k;
    s.first_node = stage_starts[k];
    s.end_node = k + 1 < stages ? stage_starts[k + 1] : forward_count;
    static const std::set<uint32_t> kNone;
    const std::set<uint32_t>& recv_fwd = k > 0 ? routes.forward_send[k - 1] : kNone;
    const std::set<uint32_t>& recv_bwd = k + 1 < stages ? routes.backward_send[k + 1] : kNone;
    s.recv_activations = names_of(g, recv_fwd);
    s.send_activations = names_of(g, routes.forward_send[k]);
    s.kept = names_of(g, routes.kept[k]);
    s.recv_gradients = names_of(g, recv_bwd);
    s.send_gradients = names_of(g, routes.backward_send[k]);
    for (ValueId in : g.inputs) {
      const bool forward_reads = data_inputs_read[k * 2].contains(in.index);
      const bool backward_reads = data_inputs_read[k * 2 + 1].contains(in.index);
      if (forward_reads) s.forward_data_inputs.push_back(g.value(in).name);
      if (backward_reads) s.backward_data_inputs.push_back(g.value(in).name);
      if (forward_reads || backward_reads) s.data_inputs.push_back(g.value(in).name);
    }

    // Forward graph: received activations, then data inputs, its nodes, then outputs.
    SubgraphBuilder fwd(g);
    for (uint32_t v : recv_fwd) fwd.add_input(ValueId{v});
    for (ValueId in : g.inputs)
      if (data_inputs_read[k * 2].contains(in.index)) fwd.add_input(in);
    for (size_t i = static_cast<size_t>(s.first_node); i < static_cast<size_t>(s.end_node); ++i) {
      const Node& node = g.node(order[i]);
      fwd.add_node(node);
      if (!node.is_onnx_op("BatchNormalization") || node.outputs.size() != 3) continue;
      for (int o : {1, 2}) {  // as the Trainer: running statistics whose State it replaces
        if (!node.outputs[o].valid() || !g.value(node.inputs[o + 2]).data) continue;
        s.running_stats.emplace_back(g.value(node.outputs[o]).name, g.value(node.inputs[o + 2]).name);
      }
    }
    for (uint32_t v : routes.forward_send[k]) fwd.add_output(ValueId{v});
    for (uint32_t v : routes.kept[k]) fwd.add_output(ValueId{v});
    for (ValueId out : made_outputs[k * 2]) fwd.add_output(out);
    for (const auto& [output, state] : s.running_stats) fwd.add_output(*g.find_value(output));
    const NodeId loss_producer = g.value(training.loss).producer;
    if (loss_producer.valid() && node_phase[position_of.at(loss_producer.index)] == kForward &&
        node_stage[position_of.at(loss_producer.index)] == k) {
      s.loss = g.value(training.loss).name;
      fwd.add_output(training.loss);
    }
    s.forward = fwd.take();

    // Backward graph: kept activations, received gradients, data inputs, its nodes, then outputs.
    SubgraphBuilder bwd(g);
    for (uint32_t v : routes.kept[k]) bwd.add_input(ValueId{v});
    for (uint32_t v : recv_bwd) bwd.add_input(ValueId{v});
    for (ValueId in : g.inputs)
      if (data_inputs_read[k * 2 + 1].contains(in.index)) bwd.add_input(in);
    for (size_t i = static_cast<size_t>(forward_count); i < order.size(); ++i)
      if (node_stage[i] == k) bwd.add_node(g.node(order[i]));
    for (uint32_t v : routes.backward_send[k]) bwd.add_output(ValueId{v});
    for (const auto& [param, gradient] : stage_parameters[k]) {
      s.parameters.push_back(g.value(param).name);
      s.parameter_gradients.emplace_back(g.value(param).name, g.value(gradient).name);
      bwd.add_output(gradient);
    }
    for (ValueId out : made_outputs[k * 2 + 1]) bwd.add_output(out);
    s.backward = bwd.take();
  }
  return result;
}

}  // namespace onnxtrain
