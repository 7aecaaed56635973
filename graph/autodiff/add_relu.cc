// Add + Relu fused for training (add_relu.h).
#include "graph/autodiff/add_relu.h"

#include <optional>

namespace onnxtrain {
namespace {

// The Relu that alone reads the output of Add node `add`, when the pair can be fused.
std::optional<NodeId> fusable_relu(const Graph& g, const Node& add) {
  if (!add.is_onnx_op("Add") || add.attributes.contains(kFusedActivation) || add.inputs.size() != 2 ||
      add.outputs.size() != 1 || !add.outputs[0].valid() || !add.inputs[0].valid() || !add.inputs[1].valid())
    return std::nullopt;
  for (ValueId v : {add.inputs[0], add.inputs[1], add.outputs[0]})
    if (g.value(v).dtype != DType::Float32) return std::nullopt;
  const std::optional<NodeId> reader = g.sole_reader(add.outputs[0]);
  if (!reader) return std::nullopt;
  const Node& relu = g.node(*reader);
  if (!relu.is_onnx_op("Relu") || relu.outputs.size() != 1 || !relu.outputs[0].valid()) return std::nullopt;
  return reader;
}

}  // namespace

int fuse_add_relu(Graph& graph) {
  int fused = 0;
  for (NodeId id : std::vector<NodeId>(graph.order())) {
    const std::optional<NodeId> relu = fusable_relu(graph, graph.node(id));
    if (!relu) continue;
    const ValueId z = graph.node(*relu).outputs[0];
    graph.remove_node(*relu);
    Node& add = graph.node(id);
    graph.value(add.outputs[0]).producer = NodeId{};
    add.outputs[0] = z;
    add.attributes[kFusedActivation] = std::string("Relu");
    graph.value(z).producer = id;
    ++fused;
  }
  if (fused > 0) graph.sort();
  return fused;
}

}  // namespace onnxtrain
