// BatchNormalization + Relu fused for training (batch_norm_relu.h).
#include "graph/autodiff/batch_norm_relu.h"

#include <optional>

#include "graph/autodiff/relu_fusion.h"

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
  return sole_relu_reader(g, bn.outputs[0]);
}

}  // namespace

int fuse_batch_norm_relu(Graph& graph) { return fuse_relus(graph, fusable_relu); }

}  // namespace onnxtrain
