// Relu then MaxPool trained as MaxPool then Relu (pool_before_relu.h).
#include "graph/autodiff/pool_before_relu.h"

#include <optional>
#include <utility>

namespace onnxtrain {
namespace {

// The MaxPool that alone reads Relu node `relu`'s output, when the pair can be swapped.
std::optional<NodeId> swappable_pool(const Graph& g, const Node& relu) {
  if (!relu.is_onnx_op("Relu") || relu.outputs.size() != 1 || !relu.outputs[0].valid()) return std::nullopt;
  const ValueId y = relu.outputs[0];
  const std::optional<NodeId> reader = g.sole_reader(y);
  if (!reader) return std::nullopt;
  const Node& pool = g.node(*reader);
  if (!pool.is_onnx_op("MaxPool") || pool.inputs.size() != 1 || pool.inputs[0] != y || pool.outputs.empty() ||
      !pool.outputs[0].valid())
    return std::nullopt;
  if (pool.outputs.size() > 1 && pool.outputs[1].valid()) return std::nullopt;  // Indices read
  return reader;
}

}  // namespace

int pool_before_relu(Graph& graph) {
  int moved = 0;
  for (NodeId relu_id : std::vector<NodeId>(graph.order())) {
    const std::optional<NodeId> pool_id = swappable_pool(graph, graph.node(relu_id));
    if (!pool_id) continue;
    // x -> Relu -> y -> MaxPool -> p   becomes   x -> MaxPool -> q -> Relu -> p
    const ValueId x = graph.node(relu_id).inputs[0], y = graph.node(relu_id).outputs[0];
    const ValueId p = graph.node(*pool_id).outputs[0];
    Value pooled = graph.value(p);
    pooled.name = graph.unused_value_name(graph.value(p).name + "_before_relu");
    pooled.producer = *pool_id;
    const ValueId q = graph.add_value(std::move(pooled));
    Node& pool = graph.node(*pool_id);
    pool.inputs[0] = x;
    pool.outputs[0] = q;
    Node& relu = graph.node(relu_id);
    relu.inputs[0] = q;
    relu.outputs[0] = p;
    graph.value(p).producer = relu_id;
    graph.value(y).producer = NodeId{};
    ++moved;
  }
  if (moved > 0) graph.sort_depth_first();  // each MaxPool just before its Relu
  return moved;
}

}  // namespace onnxtrain
