// Add + Relu fused for training (add_relu.h).
#include "graph/autodiff/add_relu.h"

#include <optional>

#include "graph/autodiff/relu_fusion.h"

namespace onnxtrain {
namespace {

// The Relu that alone reads the output of Add node `add`, when the pair can be fused.
std::optional<NodeId> fusable_relu(const Graph& g, const Node& add) {
  if (!add.is_onnx_op("Add") || add.attributes.contains(kFusedActivation) || add.inputs.size() != 2 ||
      add.outputs.size() != 1 || !add.outputs[0].valid() || !add.inputs[0].valid() || !add.inputs[1].valid())
    return std::nullopt;
  for (ValueId v : {add.inputs[0], add.inputs[1], add.outputs[0]})
    if (g.value(v).dtype != DType::Float32) return std::nullopt;
  return sole_relu_reader(g, add.outputs[0]);
}

}  // namespace

int fuse_add_relu(Graph& graph) { return fuse_relus(graph, fusable_relu); }

}  // namespace onnxtrain
