#include "tools/model_import.h"

namespace onnxtrain::cli {

ImportedModel import_for_costs(const std::string& path, int64_t seq_len, ImportOptions options) {
  ImportedModel model = import_model(path, options);
  if (seq_len <= 0 || model.graph.inputs.empty()) return model;
  const Shape& shape = model.graph.value(model.graph.inputs[0]).shape;
  if (!shape.rank_known) return model;
  options.dims = data_input_bindings(model.graph, std::vector<int64_t>(shape.dims.size(), seq_len));
  return options.dims.empty() ? model : import_model(path, options);
}

std::vector<std::string> unbound_sequence_dims(const Graph& graph) {
  std::vector<std::string> names;
  if (graph.inputs.empty()) return names;
  const Shape& shape = graph.value(graph.inputs[0]).shape;
  for (size_t d = 1; shape.rank_known && d < shape.dims.size(); ++d)
    if (shape.dims[d].is_symbolic()) names.push_back(shape.dims[d].symbol_name());
  return names;
}

bool is_language_model(const Graph& graph) {
  if (graph.inputs.empty() || graph.outputs.empty()) return false;
  const Shape& logits = graph.value(graph.outputs.front()).shape;
  return is_integer(graph.value(graph.inputs[0]).dtype) && logits.rank_known && logits.rank() == 3;
}

}  // namespace onnxtrain::cli
