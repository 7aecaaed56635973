// Single slices gathered from a Transpose's output are gathered from its input instead, when each slice
// then holds its elements in the input's order: the Transpose (a copy of the whole tensor) goes, and what
// is left of it is a Squeeze of size-1 axes (a view). torch's nn.MultiheadAttention splits its packed
// q, k and v projection (L, N, 3E) as
//   unflatten (L, N, 3, E) -> unsqueeze(0) -> Transpose perm (3, 1, 2, 0, 4) -> squeeze -> x[0], x[1], x[2]
// which both exporters keep: a copy of the 3E-wide projection forward and one backward per layer (the
// TorchScript ViT: 1.1 + 0.8 ms of a 380 ms step per layer at one thread). Rewritten, each Gather takes
// its slice from axis 3 of (1, L, N, 3, E) (rows of E copied), then a Squeeze drops the leading 1; the
// backward's Concat of the three slice gradients (gathered_slices.cc) fills (1, L, N, 3, E) in place of
// the Transpose's own gradient.
//
// A Transpose is rewritten when every reader of it (or of the Squeeze that alone reads it) is a Gather of
// a constant scalar index whose slice keeps the other axes in the input's order. Only the training graph.
//
//   int rewritten = gather_before_transpose(forward);   // make_training_recipe, before autodiff
#pragma once

#include "graph/graph.h"

namespace onnxtrain {

// Rewrites every such Transpose of `graph`; returns how many Transposes it removed.
int gather_before_transpose(Graph& graph);

}  // namespace onnxtrain
