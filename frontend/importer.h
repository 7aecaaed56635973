// The ONNX importer: reads a .onnx file (weights inline or in external data files next to it), inlines
// model-local functions, validates it (ONNX's checker and shape inference where Debian's ONNX 1.12
// knows the opset, onnxtrain's own schemas beyond that), folds constant subgraphs and returns onnxtrain's
// IR with every initializer classified (parameter, state, buffer, constant). Protobuf stays inside
// frontend/: callers see only the Graph.
//
//   ImportOptions options;
//   options.batch = 64;                    // bind the symbolic batch dim (folds more); default: keep symbolic
//   ImportedModel model = import_model("models/cnn_opset17.onnx", options);
//   for (NodeId n : model.graph.order()) ...
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace onnxtrain {

struct ImportOptions {
  std::optional<int64_t> batch;  // binds the symbolic leading dim of the graph inputs
  std::string freeze_pattern;    // ECMAScript regex; matching parameters become frozen
  // Binds other symbolic dims of the graph inputs by name (a sequence length "seq" = 128): shapes that
  // an exporter computes from them (attention masks, position ids) become static and fold.
  SymbolBindings dims;
  // inspect: a node that cannot be typed (an op onnxtrain lacks whose outputs ONNX's inference leaves
  // untyped, an attribute onnxtrain refuses) leaves its outputs, and those of the nodes that read them,
  // untyped (DType::Undefined) and is listed in ImportedModel::untyped_nodes; import goes on. Such a graph
  // can be listed, not run or trained.
  bool keep_untypable = false;
};

struct ImportedModel {
  Graph graph;
  std::vector<std::string> notes;  // what the importer did that a user may want to know
  // Ops present in the model that onnxtrain has no schema for (op type, with domain when not ai.onnx):
  // they load (shapes from ONNX's inference) but cannot be trained yet.
  std::vector<std::string> unsupported_ops;
  std::string first_unsupported_node;  // the name of the first such node in graph order; "" when none
  int folded_nodes = 0;                // nodes replaced by constants
  // ImportOptions::keep_untypable: "node 'n' (Op): why" for each node that could not be typed itself, and
  // the count of nodes after them left untyped because they read an untyped value.
  std::vector<std::string> untyped_nodes;
  int untyped_after = 0;
  // Elements of the float tensors (initializers and Constant nodes) inside If, Loop and Scan bodies, nested
  // ones too: weights no node of the imported graph reads (onnxtrain runs none of those ops).
  int64_t subgraph_weight_elements = 0;
  // The model's metadata_props (a model `train` wrote records its preprocessing: onnxtrain.preprocess.*).
  std::map<std::string, std::string> metadata;
};

// The bindings that make the non-batch symbolic dims of the graph's data input (its first input) the
// sizes of data shaped `sizes` (batch first): what ImportOptions::dims takes to import for that data.
SymbolBindings data_input_bindings(const Graph& graph, const std::vector<int64_t>& sizes);
// The same for every data input given, by name: each input's non-batch symbolic dims bound to its sizes
// (a transformer's sequence length, T5's decoder length). Inputs not given, or of another rank, bind nothing.
SymbolBindings input_dim_bindings(const Graph& graph, const std::map<std::string, std::vector<int64_t>>& sizes);

// Throws onnxtrain::Error naming the file (and the node, op, domain and opset where one is at fault).
ImportedModel import_model(const std::string& path, const ImportOptions& options = {});

// The initializers of the .onnx file at `path`, by name, as stored (external data loaded, sizes checked),
// without importing the graph: the weights of a model (train --init-from). Throws Error naming the file.
std::map<std::string, Tensor> read_model_initializers(const std::string& path);

// The files a model's tensors are stored in besides the model file itself (their external-data
// locations, resolved against the model's folder), each once; empty when the file does not parse.
std::vector<std::string> external_data_files(const std::string& model_path);

// The opsets of the default domain onnxtrain accepts.
constexpr int kMinOpset = 7;
constexpr int kMaxOpset = 21;
// The newest default-domain opset Debian's ONNX library (1.12) knows: its checker, shape inference and
// version converter run up to here; beyond it, onnxtrain's own schemas carry the model.
constexpr int kOnnxLibraryMaxOpset = 17;

}  // namespace onnxtrain
