// GELU written out in elementwise ops trained as one Gelu node (ONNX's Gelu, opset 20). Exporters below
// opset 20 spell nn.GELU as its formula:
//   erf:  0.5 · x · (1 + Erf(x / √2))                              (x · (1/√2) too)
//   tanh: 0.5 · x · (1 + Tanh(√(2/π) · (x + 0.044715 · x³)))       (x³ as Pow(x, 3) or x · x · x)
// with the three factors of the product grouped in any order (torch's nn.GELU, Hugging Face's GELU and
// NewGELU, TorchScript and dynamo exports). Apart, each of the five to nine ops is a pass over the
// activation forward and one or two backward, and the backward keeps their intermediates; Gelu is one
// pass each way (oneDNN's eltwise gelu_erf / gelu_tanh) and keeps x only. A match needs every
// intermediate read by the formula alone and the constants within 1e-5 of their values (exporters write
// √2 as a float or a double).
//
// Only the training graph is fused (the evaluation graph and the written model keep the original nodes).
//
//   int fused = fuse_gelu(forward);   // make_training_recipe, before autodiff
#pragma once

#include "graph/graph.h"

namespace onnxtrain {

// Replaces every float32 GELU formula of `graph` by a Gelu node (approximate "none" or "tanh") that writes
// the formula's output; returns how many it replaced.
int fuse_gelu(Graph& graph);

}  // namespace onnxtrain
