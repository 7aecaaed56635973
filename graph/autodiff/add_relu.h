// Add followed by Relu, trained as one node on the CPU: a ResNet block's end, out = Relu(branch + x).
// Apart they cost a pass over the sum for the Relu (torchvision ResNet-50 at 224x224, batch 16, two
// threads: Relu 32 ms of a 1.83 s step, its 16 tensors 352 MB read and written again). Fused, the Add
// writes max(a + b, 0) as Relu computes it (its attribute fused_activation = "Relu", graph/fused_activation.h),
// and its gradient masks dZ by the fused output before both inputs take it, as Relu's gradient (which
// reads its output) and Add's do apart: the same values in the same order.
//
// Applies to a float32 Add (broadcasting or not: the kernels compute Relu(a + b) element by element, and
// the gradient masks before summing down to each input's shape) whose output only one Relu reads and is
// not a graph output; the Relu leaves the graph and its output becomes the Add's. Only the training graph
// is fused (the evaluation graph and the written model keep both).
//
//   int fused = fuse_add_relu(forward);   // make_training_recipe, before autodiff
#pragma once

#include "graph/fused_activation.h"
#include "graph/graph.h"

namespace onnxtrain {

// Fuses every such pair of `graph`; returns how many.
int fuse_add_relu(Graph& graph);

}  // namespace onnxtrain
