// How the commands that only look at a model (inspect, partition, simulate) import it: with the data
// input's sequence length bound when one is given, so the shapes exporters compute from it (attention
// masks, position ids, every activation) are static and FLOPs, memory and stage costs are true; and
// whether it is a language model, whose cross-entropy takes the classes from the logits' last axis.
//
//   ImportedModel m = import_for_costs("gpt2.onnx", /*seq_len=*/128);
//   spec.classes_last = is_language_model(m.graph);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "frontend/importer.h"

namespace onnxtrain::cli {

// seq_len > 0 binds every symbolic non-batch dim of the data input (the graph's first input) to it.
ImportedModel import_for_costs(const std::string& path, int64_t seq_len, ImportOptions options = {});
// The symbolic non-batch dims of the data input still unbound ("seq"): their costs are unknown.
std::vector<std::string> unbound_sequence_dims(const Graph& graph);
// An integer (token id) data input and rank-3 logits (N, T, V) as the first output.
bool is_language_model(const Graph& graph);

}  // namespace onnxtrain::cli
