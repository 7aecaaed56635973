// What the Relu fusions of the training graph share (batch_norm_relu.h, add_relu.h): each finds, for a
// node, the Relu that alone reads its output (`fusable`), and that Relu leaves the graph, its output becoming
// the node's, which carries fused_activation = "Relu" (graph/fused_activation.h).
//
//   return fuse_relus(graph, [](const Graph& g, const Node& n) -> std::optional<NodeId> { ... });
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/fused_activation.h"
#include "graph/graph.h"

namespace onnxtrain {

// The Relu that alone reads `v` (not a graph output), if one does.
inline std::optional<NodeId> sole_relu_reader(const Graph& g, ValueId v) {
  const std::optional<NodeId> reader = g.sole_reader(v);
  if (!reader) return std::nullopt;
  const Node& relu = g.node(*reader);
  if (!relu.is_onnx_op("Relu") || relu.outputs.size() != 1 || !relu.outputs[0].valid()) return std::nullopt;
  return reader;
}

// Fuses every node of `graph` for which fusable(graph, node) gives a Relu; returns how many.
template <typename Fusable>
int fuse_relus(Graph& graph, Fusable&& fusable) {
  int fused = 0;
  for (NodeId id : std::vector<NodeId>(graph.order())) {
    const std::optional<NodeId> relu = fusable(graph, graph.node(id));
    if (!relu) continue;
    const ValueId z = graph.node(*relu).outputs[0];
    graph.remove_node(*relu);
    Node& node = graph.node(id);
    graph.value(node.outputs[0]).producer = NodeId{};
    node.outputs[0] = z;
    node.attributes[kFusedActivation] = std::string("Relu");
    graph.value(z).producer = id;
    ++fused;
  }
  // No sort: the node precedes its Relu, and every reader of z follows it. Under autocast the weight Casts
  // stay beside their layers, where sort() would move them to the front (graph.h).
  return fused;
}

}  // namespace onnxtrain
