// How the commands that only look at a model (inspect, partition, simulate) import it: with the data
// input's sequence length bound when one is given, so the shapes exporters compute from it (attention
// masks, position ids, every activation) are static and FLOPs, memory and stage costs are true; and
// whether it is a language model, whose cross-entropy takes the classes from the logits' last axis.
//
//   ImportedModel m = import_for_costs("gpt2.onnx", /*seq_len=*/128);
//   spec.classes_last = is_language_model(m.graph);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "frontend/dataset.h"
#include "frontend/importer.h"

namespace onnxtrain::cli {

// seq_len > 0 binds every symbolic non-batch dim of the data input (the graph's first input) to it.
ImportedModel import_for_costs(const std::string& path, int64_t seq_len, ImportOptions options = {});
// The symbolic non-batch dims of the data input still unbound ("seq"): their costs are unknown.
std::vector<std::string> unbound_sequence_dims(const Graph& graph);
// An integer (token id) data input and rank-3 logits (N, T, V) as the first output.
bool is_language_model(const Graph& graph);

// The batch a model was exported with when its data input's first dim is a number, not a symbol
// (torch.onnx.export without dynamic_axes or dynamic_shapes), or when the input's is a symbol but the
// first output's is a number: a node's constant sizes (a Resize's `sizes`, a Reshape's shape) fix it
// inside the graph. nullopt for a dynamic batch.
std::optional<int64_t> fixed_batch(const Graph& model);
// "MODEL was exported with a fixed batch of B (input 'x' is (B, ...))" or "MODEL fixes the batch to B
// inside the graph (node 'n' (Resize) ...)", then `what`, then how to export a dynamic batch axis.
std::string fixed_batch_text(const std::string& path, const Graph& model, const std::string& what);

// Empty, or why `model` cannot be trained: its first data input has a number on axis 0 and its batch, the
// symbol that leads the first output, on a later axis (a sequence-first (T, batch, F) input, nn.LSTM's
// default layout), where onnxtrain reads samples along axis 0.
std::string batch_not_on_the_first_axis(const std::string& path, const Graph& model);

// The data options that fit `model`'s data inputs (train and eval start from these): integer ids where an
// input is an integer type, the first input's name (an npz array of that name), the other inputs by name,
// and the tokens per sample: seq_len, else the first input's static length.
DatasetOptions data_options_for(const Graph& model, int64_t seq_len);
// Error unless every data input of `data` fits its graph input (rank, static dims, ids against floats).
void check_data_fits_model(const Dataset& data, const Graph& model);

}  // namespace onnxtrain::cli
