// What a PyTorch export commonly gets wrong, said before training (export_pitfalls.h).
#include "tools/export_pitfalls.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <set>
#include <span>

namespace onnxtrain::cli {

namespace {

// "row K of embedding 'W' (read by Gather 'n') is all zeros" when Gather node `n` reads a trained float32
// (rows, width) table, of 2 rows or more, with exactly one row of zeros; "" otherwise.
std::string zero_embedding_row(const Graph& graph, const Node& n) {
  if (n.inputs.empty() || !n.inputs[0].valid() || n.attr_int("axis", 0) != 0) return "";
  const Value& table = graph.value(n.inputs[0]);
  if (table.role != ValueRole::Parameter || !table.data || table.data->dtype() != DType::Float32 ||
      table.data->sizes().size() != 2 || table.data->sizes()[0] < 2 || table.data->sizes()[1] < 1)
    return "";
  const int64_t rows = table.data->sizes()[0], width = table.data->sizes()[1];
  const std::span<const float> w = table.data->data<float>();
  int64_t zero_rows = 0, zero_row = -1;
  for (int64_t r = 0; r < rows && zero_rows < 2; ++r) {
    if (std::all_of(w.begin() + r * width, w.begin() + (r + 1) * width, [](float v) { return v == 0.0f; })) {
      ++zero_rows;
      zero_row = r;
    }
  }
  if (zero_rows != 1) return "";
  return "row " + std::to_string(zero_row) + " of embedding '" + table.name + "' (read by Gather '" + n.name +
         "') is all zeros";
}

// Ops that take pieces of a tensor or change its shape or type, computing nothing from its values.
bool moves_data_only(const Node& n) {
  return std::ranges::any_of(
      std::initializer_list<const char*>{"Slice", "Split", "Shape", "Size", "Concat", "Reshape", "Transpose",
                                         "Unsqueeze", "Squeeze", "Flatten", "Expand", "Gather", "Cast"},
      [&](const char* op) { return n.is_onnx_op(op); });
}

}  // namespace

// What a PyTorch export commonly gets wrong and onnxtrain would otherwise train in silence
// (docs/bring-your-own-model.md): the probabilities of a final Softmax under cross-entropy, which applies its
// own log-softmax; and a deep convolutional network without any normalisation node, which is what
// TorchScript's export from eval() and dynamo's default optimize=True leave of BatchNorm layers (folded
// into the convolutions). The second can be a network built so, hence a note, not a warning. Also:
// parameters the exporter merged, and an embedding table with one zero row (what nn.Embedding(padding_idx=k)
// makes; the export drops padding_idx, so the row trains).
std::vector<std::string> export_pitfalls(const TrainOptions& o, const Graph& graph) {
  std::vector<std::string> lines;
  if (!graph.outputs.empty() && (o.loss == "cross-entropy" || o.loss == "softmax-cross-entropy")) {
    const Value& logits = graph.value(graph.outputs.front());
    if (logits.producer.valid()) {
      const Node& last = graph.node(logits.producer);
      if (last.is_onnx_op("Softmax") || last.is_onnx_op("LogSoftmax"))
        lines.push_back("warning: the model's output '" + logits.name + "' comes from a " + last.op_type + " node ('" +
                        last.name +
                        "'), but cross-entropy applies its own log-softmax to logits: export the model without its "
                        "final " +
                        last.op_type +
                        " (as PyTorch's CrossEntropyLoss expects), or training will be slow "
                        "and poor");
    }
  }
  // A parameter that several nodes of one op read (through Identity too): what an exporter makes of layers
  // whose initial values are equal (PyTorch's layers each have their own), which would then train tied.
  // The dynamo exporter's default optimize=True merges a fresh model's normalisation ones and zeros
  // (tests/data/outside/make_tied_norm_export.py); TorchScript's export merges every equal initializer,
  // nn.TransformerEncoder's deep-copied layers whole (make_transformer_encoder_export.py). A weight tied on
  // purpose (an embedding and the output layer) is read by nodes of different ops and not reported; nor are
  // the ops that only take pieces of a weight or reshape it (an LSTM export's Slices of its W and R).
  int convs = 0, normalisations = 0;
  std::map<std::pair<ValueId, std::string>, std::vector<std::string>> readers;  // (parameter, op) -> nodes
  std::map<ValueId, ValueId> through_identity;  // an Identity's output -> the parameter it passes on
  std::string padding_row;                      // the first embedding with one all-zero row
  for (NodeId id : graph.order()) {
    const Node& n = graph.node(id);
    convs += n.is_onnx_op("Conv") ? 1 : 0;
    const bool normalisation =
        std::ranges::any_of(std::initializer_list<const char*>{"BatchNormalization", "InstanceNormalization",
                                                               "LayerNormalization", "GroupNormalization"},
                            [&](const char* op) { return n.is_onnx_op(op); });
    if (n.is_onnx_op("Gather") && padding_row.empty()) padding_row = zero_embedding_row(graph, n);
    normalisations += normalisation ? 1 : 0;
    for (ValueId in : n.inputs) {
      if (!in.valid()) continue;
      const auto passed = through_identity.find(in);
      const ValueId source = passed != through_identity.end() ? passed->second : in;
      if (graph.value(source).role != ValueRole::Parameter) continue;
      if (n.is_onnx_op("Identity") && !n.outputs.empty()) {
        through_identity[n.outputs[0]] = source;
      } else if (!moves_data_only(n)) {
        readers[{source, n.op_type}].push_back(n.name);
      }
    }
  }
  std::set<ValueId> shared;
  std::string example;
  for (const auto& [key, nodes] : readers) {
    if (nodes.size() < 2) continue;
    if (shared.empty())
      example = "'" + graph.value(key.first).name + "' (" + std::to_string(nodes.size()) + " " + key.second +
                " nodes: '" + nodes[0] + "', '" + nodes[1] + "'" + (nodes.size() > 2 ? ", ..." : "") + ")";
    shared.insert(key.first);
  }
  if (!shared.empty())
    lines.push_back("warning: " + std::to_string(shared.size()) + " parameter" + (shared.size() > 1 ? "s are" : " is") +
                    " each read by several nodes of one op, e.g. " + example +
                    ": each will train as one tensor. If each PyTorch layer has its own, the exporter merged equal "
                    "initial values (TorchScript's export merges them all, nn.TransformerEncoder's deep-copied "
                    "layers whole; dynamo's optimize=True the normalisation layers' ones and zeros): export with "
                    "torch.onnx.export(..., dynamo=True, optimize=False)");
  if (!padding_row.empty())
    lines.push_back("warning: " + padding_row +
                    ", as nn.Embedding(padding_idx=...) makes it. The export does not record padding_idx, so that row "
                    "will train like the others (PyTorch keeps it at zero, with no gradient)");
  if (convs >= 5 && normalisations == 0)
    lines.push_back("note: " + std::to_string(convs) +
                    " Conv nodes and no normalisation node: if the PyTorch model has BatchNorm layers, the export "
                    "folded them into the convolutions (TorchScript from eval() or with constant folding, dynamo "
                    "with optimize=True), and they will not be trained; export from train() mode with "
                    "training=TrainingMode.TRAINING, do_constant_folding=False (docs/bring-your-own-model.md)");
  return lines;
}

}  // namespace onnxtrain::cli
