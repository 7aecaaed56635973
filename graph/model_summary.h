// What `onnxtrain inspect` reports about a graph: inputs/outputs, op histogram, per-node shapes,
// parameters, FLOPs and activation bytes, and totals. Costs are for a batch of `batch` samples with the
// symbolic batch dims bound to it.
//
//   ModelSummary s = summarize_model(graph, /*batch=*/1);
//   s.forward_flops;   // FLOPs of one forward pass over the batch
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace onnxtrain {

struct TensorSummary {
  std::string name;
  DType dtype;
  Shape shape;
};

struct NodeSummary {
  std::string name;
  std::string op_type;
  std::string domain;
  Shape output_shape;      // of the first output, as the graph has it (symbolic batch kept)
  int64_t parameters = 0;  // elements of the parameters this node is the first user of
  double forward_flops = 0;
  double backward_flops = 0;
  int64_t activation_bytes = 0;  // bytes of the outputs (what backward may keep); 0 where unknown
  bool supported = true;         // onnxtrain has a schema for the op
  bool typed = true;             // its outputs have types (ImportOptions::keep_untypable leaves some without)
};

struct ModelSummary {
  ModelInfo info;
  int64_t batch = 1;
  SymbolBindings bindings;  // the batch symbols bound to `batch`, as the costs use them
  std::vector<TensorSummary> inputs, outputs;
  std::map<std::string, int> op_histogram;  // "Conv", or "domain.Op" outside ai.onnx
  std::vector<NodeSummary> nodes;
  int64_t parameters = 0, trainable_parameters = 0, frozen_parameters = 0;
  int64_t state_elements = 0, buffer_elements = 0, constant_elements = 0;
  int64_t parameter_bytes = 0;
  double forward_flops = 0, backward_flops = 0;  // for the whole batch
  int64_t activation_bytes = 0;
  std::vector<std::string> untrainable_ops;  // op types without an onnxtrain schema
};

ModelSummary summarize_model(const Graph& graph, int64_t batch);

}  // namespace onnxtrain
