// Autodiff, the graph side: from a forward graph, a loss value and the values to differentiate with
// respect to, build one training graph (forward nodes, then backward nodes) that later stages partition
// and execute. The gradients become graph outputs named "<value>_grad", after the forward outputs and
// the loss, so an InferenceSession runs a training step's forward and backward as one graph.
//
//   TrainingGraph t = build_training_graph(model.graph, {.loss = "loss"});   // every trainable parameter
//   for (const TrainingGraph::Gradient& g : t.gradients) ... t.graph.value(g.gradient).name ...
//   t.unreachable   // parameters the loss does not depend on, by name
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace onnxtrain {

struct TrainingGraphOptions {
  std::string loss;              // name of the value to minimise (a float tensor; non-scalar: its sum)
  std::vector<std::string> wrt;  // values to differentiate with respect to; empty: every non-frozen Parameter
};

struct TrainingGraph {
  struct Gradient {
    ValueId value;     // the parameter (or input) being differentiated with respect to
    ValueId gradient;  // its gradient, shaped like it
  };
  Graph graph;
  ValueId loss;
  std::vector<Gradient> gradients;       // in the order of `wrt` (or of the graph's initializers)
  std::vector<std::string> unreachable;  // wrt values the loss does not depend on: no gradient
  size_t forward_node_count = 0;         // graph.order() starts with the forward nodes
  // Per node index: the forward node whose gradient rule emitted it; invalid for forward nodes.
  std::vector<NodeId> emitted_for;
};

// Throws Error when the loss is missing or not float, a wrt value is missing or not float, no wrt value
// reaches the loss, or a node on the way has no gradient rule (naming the node and op).
TrainingGraph build_training_graph(const Graph& forward, const TrainingGraphOptions& options);

}  // namespace onnxtrain
