// The IR: a Graph owns Nodes and Values, connected by typed ids (NodeId, ValueId), never by name
// (names are labels for people and for writing the model back). A Value knows its producer; consumers
// are derived on demand. Nothing here knows about protobuf.
//
//   Graph g;
//   ValueId x = g.add_value({.name = "x", .dtype = DType::Float32, .shape = Shape::of({1, 4})});
//   ValueId y = g.add_value({.name = "y", .dtype = DType::Float32});
//   g.inputs.push_back(x);
//   NodeId relu = g.add_node({.name = "relu0", .op_type = "Relu", .inputs = {x}, .outputs = {y}});
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "graph/attributes.h"
#include "graph/dtype.h"
#include "graph/shape.h"
#include "graph/tensor.h"

namespace onnxtrain {

template <typename Tag>
struct Id {
  static constexpr uint32_t kInvalid = UINT32_MAX;
  uint32_t index = kInvalid;
  bool valid() const { return index != kInvalid; }
  auto operator<=>(const Id&) const = default;
};
using NodeId = Id<struct NodeTag>;
using ValueId = Id<struct ValueTag>;

// What a value is to training.
enum class ValueRole {
  Activation,  // produced by a node
  Input,       // graph input fed by data
  Parameter,   // float initializer feeding a weight/bias slot: trained
  State,       // BatchNorm running statistics: updated in training mode, never trained
  Buffer,      // integer/bool initializer: never trained
  Constant,    // Constant node, folded value or scalar float initializer: never trained
};
std::string_view value_role_name(ValueRole role);

struct Value {
  std::string name;
  DType dtype = DType::Undefined;
  Shape shape = Shape::unknown_rank();
  ValueRole role = ValueRole::Activation;
  bool frozen = false;                    // a Parameter excluded from training (--freeze)
  std::optional<Tensor> data;             // initializers and constants
  std::optional<std::vector<Dim>> known;  // element values of a small 1-D int tensor (shape arithmetic)
  NodeId producer;                        // invalid for inputs, initializers and constants
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;           // "" is the default ONNX domain
  int opset = 0;                // the version of `domain` the model imports
  std::vector<ValueId> inputs;  // an invalid id marks an omitted optional input
  std::vector<ValueId> outputs;
  Attributes attributes;

  bool has_input(size_t i) const { return i < inputs.size() && inputs[i].valid(); }
  // An op of the default ONNX domain (not a same-named op of another domain).
  bool is_onnx_op(std::string_view type) const { return op_type == type && domain.empty(); }
  bool has_attribute(const std::string& key) const { return attributes.has(key); }
  int64_t attr_int(const std::string& key, int64_t fallback) const { return attributes.get_int(key, fallback); }
  double attr_float(const std::string& key, double fallback) const { return attributes.get_float(key, fallback); }
  std::string attr_string(const std::string& key, const std::string& fallback) const {
    return attributes.get_string(key, fallback);
  }
  std::vector<int64_t> attr_ints(const std::string& key, const std::vector<int64_t>& fallback = {}) const {
    return attributes.get_ints(key, fallback);
  }
  std::vector<double> attr_floats(const std::string& key) const { return attributes.get_floats(key); }
  const Tensor* attr_tensor(const std::string& key) const { return attributes.get_tensor(key); }
};

struct ModelInfo {
  std::string path;
  std::string producer_name;
  std::string producer_version;
  int64_t ir_version = 0;
  std::map<std::string, int> opsets;       // domain → version ("" = ai.onnx)
  std::vector<std::string> batch_symbols;  // symbolic leading dims of graph inputs
};

class Graph {
 public:
  ModelInfo info;
  std::vector<ValueId> inputs;  // data inputs (not initializers)
  std::vector<ValueId> outputs;
  std::vector<ValueId> initializers;  // Parameter, State, Buffer and Constant values with data

  ValueId add_value(Value value);
  NodeId add_node(Node node);  // sets the producer of its outputs

  Value& value(ValueId id) { return values_.at(id.index); }
  const Value& value(ValueId id) const { return values_.at(id.index); }
  Node& node(NodeId id) { return nodes_.at(id.index); }
  const Node& node(NodeId id) const { return nodes_.at(id.index); }

  size_t value_count() const { return values_.size(); }
  // Live nodes in topological order (the order in which they were added, after `sort()`).
  const std::vector<NodeId>& order() const { return order_; }
  size_t node_count() const { return order_.size(); }

  std::vector<NodeId> consumers(ValueId id) const;
  // The one node that reads `id`, when no other node reads it and it is not a graph output (what a
  // rewrite that changes the value, such as a fusion, needs); nullopt otherwise.
  std::optional<NodeId> sole_reader(ValueId id) const;
  std::optional<ValueId> find_value(const std::string& name) const;
  // `base`, or base_1, base_2, ...: the first that names no value yet (for values a rewrite adds).
  std::string unused_value_name(const std::string& base) const;

  // Removes a node (its outputs lose their producer). Used by constant folding.
  void remove_node(NodeId id);
  // Replaces every use of `from` (node inputs and graph outputs) by `to`.
  void replace_uses(ValueId from, ValueId to);
  // Orders the live nodes topologically; throws Error naming a node on a cycle.
  void sort();
  // A topological order that keeps nodes where they are when their producers come before them and
  // otherwise moves each producer to just before the first node that needs it (depth first). After a
  // rewrite appends nodes, they land beside their consumers (sort() puts every node without a producer,
  // such as a Cast of a weight, at the front, far from the layer that reads it). Throws Error on a cycle.
  void sort_depth_first();

 private:
  std::vector<Node> nodes_;
  std::vector<bool> removed_;
  std::vector<Value> values_;
  std::vector<NodeId> order_;
};

// A copy of `g` whose initializers own their buffers (a plain Graph copy shares the Tensor buffers):
// for replicas that each train their own weights.
Graph copy_with_own_initializers(const Graph& g);

}  // namespace onnxtrain
