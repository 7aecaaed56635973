// Einsum (opset 12) lowered, at import, to the ops onnxtrain trains and runs on every device: each operand
// summed over the labels no other operand or the output reads (ReduceSum), then the operands contracted
// left to right, two at a time, as one batched MatMul (Transposes to (batch, free, contracted) and
// (batch, contracted, free), Reshapes that flatten each group of axes into one), and the result put in the
// output's order. Ellipses follow ONNX and numpy; the import writes implicit outputs out first
// (make_einsum_outputs_explicit, import_passes.h). The gradient is then
// the gradients of those ops; the written model keeps the Einsum (the writer replaces initializers only).
// A label repeated within one term (a diagonal or a trace), or two free axes of unknown size in one
// contraction, are refused with an Error at the node.
//
//   lower_einsum(graph, einsum);   // its inputs typed; replaces the node, its output value kept
#pragma once

#include "graph/graph.h"

namespace onnxtrain {

void lower_einsum(Graph& graph, NodeId einsum);

}  // namespace onnxtrain
