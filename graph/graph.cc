#include "graph/graph.h"

#include <algorithm>
#include <deque>

#include "graph/error.h"

namespace onnxtrain {

std::string_view value_role_name(ValueRole role) {
  switch (role) {
    case ValueRole::Activation:
      return "activation";
    case ValueRole::Input:
      return "input";
    case ValueRole::Parameter:
      return "parameter";
    case ValueRole::State:
      return "state";
    case ValueRole::Buffer:
      return "buffer";
    case ValueRole::Constant:
      return "constant";
  }
  return "activation";
}

ValueId Graph::add_value(Value value) {
  values_.push_back(std::move(value));
  return ValueId{static_cast<uint32_t>(values_.size() - 1)};
}

NodeId Graph::add_node(Node node) {
  NodeId id{static_cast<uint32_t>(nodes_.size())};
  for (ValueId out : node.outputs)
    if (out.valid()) value(out).producer = id;
  nodes_.push_back(std::move(node));
  removed_.push_back(false);
  order_.push_back(id);
  return id;
}

std::vector<NodeId> Graph::consumers(ValueId id) const {
  std::vector<NodeId> users;
  for (NodeId n : order_) {
    const auto& ins = nodes_[n.index].inputs;
    if (std::find(ins.begin(), ins.end(), id) != ins.end()) users.push_back(n);
  }
  return users;
}

std::optional<NodeId> Graph::sole_reader(ValueId id) const {
  if (std::find(outputs.begin(), outputs.end(), id) != outputs.end()) return std::nullopt;
  const std::vector<NodeId> readers = consumers(id);
  if (readers.size() != 1) return std::nullopt;
  return readers[0];
}

std::optional<ValueId> Graph::find_value(const std::string& name) const {
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i].name == name) return ValueId{static_cast<uint32_t>(i)};
  return std::nullopt;
}

std::string Graph::unused_value_name(const std::string& base) const {
  std::string name = base;
  for (int i = 1; find_value(name); ++i) name = base + "_" + std::to_string(i);
  return name;
}

void Graph::remove_node(NodeId id) {
  ONNXTRAIN_CHECK(!removed_.at(id.index), "node removed twice");
  removed_[id.index] = true;
  for (ValueId out : nodes_[id.index].outputs)
    if (out.valid() && value(out).producer == id) value(out).producer = NodeId{};
  order_.erase(std::remove(order_.begin(), order_.end(), id), order_.end());
}

void Graph::replace_uses(ValueId from, ValueId to) {
  for (NodeId n : order_)
    for (ValueId& in : nodes_[n.index].inputs)
      if (in == from) in = to;
  for (ValueId& out : outputs)
    if (out == from) out = to;
}

void Graph::sort() {
  // Kahn's algorithm over live nodes; ties keep the current order so a sorted model stays as it is.
  std::vector<int> pending(nodes_.size(), 0);
  std::vector<std::vector<NodeId>> users(nodes_.size());
  for (NodeId n : order_) {
    for (ValueId in : nodes_[n.index].inputs) {
      if (!in.valid()) continue;
      NodeId p = value(in).producer;
      if (p.valid() && !removed_[p.index]) {
        ++pending[n.index];
        users[p.index].push_back(n);
      }
    }
  }
  std::deque<NodeId> ready;
  for (NodeId n : order_)
    if (pending[n.index] == 0) ready.push_back(n);
  std::vector<NodeId> sorted;
  while (!ready.empty()) {
    NodeId n = ready.front();
    ready.pop_front();
    sorted.push_back(n);
    for (NodeId u : users[n.index])
      if (--pending[u.index] == 0) ready.push_back(u);
  }
  if (sorted.size() != order_.size()) {
    for (NodeId n : order_) {
      if (pending[n.index] > 0) {
        const Node& node = nodes_[n.index];
        throw Error("the graph has a cycle: this node depends, through its inputs, on its own outputs")
            .at_node(node.name, node.op_type, node.domain, node.opset);
      }
    }
  }
  order_ = std::move(sorted);
}

void Graph::sort_depth_first() {
  enum : char { unseen, open, placed };
  std::vector<char> state(nodes_.size(), unseen);
  std::vector<NodeId> sorted;
  sorted.reserve(order_.size());
  // Explicit stack of (node, next input to look at): chains of thousands of nodes must not recurse.
  std::vector<std::pair<NodeId, size_t>> stack;
  for (NodeId root : order_) {
    if (state[root.index] != unseen) continue;
    stack.push_back({root, 0});
    state[root.index] = open;
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      const std::vector<ValueId>& inputs = nodes_[n.index].inputs;
      if (next < inputs.size()) {
        const ValueId in = inputs[next++];
        if (!in.valid()) continue;
        const NodeId p = value(in).producer;
        if (!p.valid() || removed_[p.index] || state[p.index] == placed) continue;
        if (state[p.index] == open) {
          const Node& node = nodes_[p.index];
          throw Error("the graph has a cycle: this node depends, through its inputs, on its own outputs")
              .at_node(node.name, node.op_type, node.domain, node.opset);
        }
        state[p.index] = open;
        stack.push_back({p, 0});
        continue;
      }
      state[n.index] = placed;
      sorted.push_back(n);
      stack.pop_back();
    }
  }
  order_ = std::move(sorted);
}

Graph copy_with_own_initializers(const Graph& g) {
  Graph copy = g;
  for (ValueId id : copy.initializers) {
    Value& v = copy.value(id);
    if (v.data) v.data = v.data->clone();
  }
  return copy;
}

}  // namespace onnxtrain
