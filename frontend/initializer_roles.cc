#include <regex>

#include "frontend/import_passes.h"
#include "graph/error.h"
#include "graph/op_schema.h"

namespace onnxtrain {

// A float initializer is trained when an op uses it as a weight, or as data with more than one element
// (a bias added by Add, a positional embedding, an embedding table). Scalars used as data (the 0.5 of a
// Mul) are constants. BatchNorm running statistics are state. Integer and bool initializers are buffers.
static ValueRole role_of(const Graph& graph, ValueId id) {
  const Value& value = graph.value(id);
  if (!is_floating(value.dtype)) return ValueRole::Buffer;
  bool weight = false, data = false, state = false;
  for (NodeId user : graph.consumers(id)) {
    const Node& node = graph.node(user);
    const OpSchema* schema = OpRegistry::builtin().find(node.domain, node.op_type);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] != id) continue;
      switch (schema ? schema->input_kind(i) : InputKind::Data) {
        case InputKind::Weight:
          weight = true;
          break;
        case InputKind::Data:
          data = true;
          break;
        case InputKind::State:
          state = true;
          break;
        case InputKind::NonDifferentiable:
          break;
      }
    }
  }
  if (state && !weight) return ValueRole::State;
  if (weight || (data && value.data->numel() > 1)) return ValueRole::Parameter;
  return ValueRole::Constant;
}

void classify_initializers(Graph& graph, const std::vector<ValueId>& initializers, const std::string& freeze_pattern) {
  std::optional<std::regex> freeze;
  if (!freeze_pattern.empty()) {
    try {
      freeze.emplace(freeze_pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw Error("--freeze '" + freeze_pattern + "' is not a valid regular expression: " + e.what());
    }
  }
  for (ValueId id : initializers) {
    Value& value = graph.value(id);
    value.role = role_of(graph, id);
    if (value.role == ValueRole::Parameter && freeze && std::regex_search(value.name, *freeze)) value.frozen = true;
  }
}

}  // namespace onnxtrain
