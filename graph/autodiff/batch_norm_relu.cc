// BatchNormalization + Relu fused for training (batch_norm_relu.h).
#include "graph/autodiff/batch_norm_relu.h"

#include <optional>

namespace onnxtrain {
namespace {

// The Relu that alone reads output 0 of BatchNormalization node `bn`, when the pair can be fused.
std::optional<NodeId> fusable_relu(const Graph& g, const Node& bn) {
  if (!bn.is_onnx_op("BatchNormalization") || bn.opset < 14 || bn.attr_int("training_mode", 0) == 0 ||
      bn.attributes.contains(kFusedActivation) || bn.outputs.empty() || !bn.outputs[0].valid())
    return std::nullopt;
  const Value& y = g.value(bn.outputs[0]);
  const Value& x = g.value(bn.inputs[0]);
  if (x.dtype != DType::Float32 || y.dtype != DType::Float32 || !x.shape.rank_known || x.shape.rank() < 3 ||
      x.shape.rank() > 5)
    return std::nullopt;
  const std::optional<NodeId> reader = g.sole_reader(bn.outputs[0]);
  if (!reader) return std::nullopt;
  const Node& relu = g.node(*reader);
  if (!relu.is_onnx_op("Relu") || relu.outputs.size() != 1 || !relu.outputs[0].valid()) return std::nullopt;
  return reader;
}

}  // namespace

int fuse_batch_norm_relu(Graph& graph) {
  int fused = 0;
  for (NodeId id : std::vector<NodeId>(graph.order())) {
    const std::optional<NodeId> relu = fusable_relu(graph, graph.node(id));
    if (!relu) continue;
    const ValueId z = graph.node(*relu).outputs[0];
    graph.remove_node(*relu);
    Node& bn = graph.node(id);
    graph.value(bn.outputs[0]).producer = NodeId{};
    bn.outputs[0] = z;
    bn.attributes[kFusedActivation] = std::string("Relu");
    graph.value(z).producer = id;
    ++fused;
  }
  if (fused > 0) graph.sort();
  return fused;
}

}  // namespace onnxtrain
