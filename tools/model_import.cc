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

std::optional<int64_t> fixed_batch(const Graph& model) {
  if (model.inputs.empty()) return std::nullopt;
  const Shape& shape = model.value(model.inputs[0]).shape;
  if (!shape.rank_known || shape.rank() < 2 || !shape.dims[0].is_static()) return std::nullopt;
  return shape.dims[0].value();
}

std::string fixed_batch_text(const std::string& path, const Graph& model, const std::string& what) {
  const Value& input = model.value(model.inputs.at(0));
  return path + " was exported with a fixed batch of " + std::to_string(*fixed_batch(model)) + " (input '" +
         input.name + "' is " + input.shape.to_string() + "): " + what + ". Or export it with a dynamic batch " +
         "axis: torch.onnx.export(..., dynamic_axes={'" + input.name + "': {0: 'batch'}}), or with dynamo=True, " +
         "dynamic_shapes=({0: torch.export.Dim('batch')},)";
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

DatasetOptions data_options_for(const Graph& model, int64_t seq_len) {
  const Value& input = model.value(model.inputs.at(0));
  const bool static_length = input.shape.rank_known && input.shape.rank() == 2 && input.shape.dims[1].is_static();
  DatasetOptions options{.seq_len = seq_len > 0     ? seq_len
                                    : static_length ? input.shape.dims[1].value()
                                                    : 0,
                         .integer_inputs = is_integer(input.dtype),
                         .float64_inputs = input.dtype == DType::Float64,
                         .input_name = input.name,
                         .input_rank = input.shape.rank_known ? input.shape.rank() : 0};
  const Shape& shape = input.shape;
  if (shape.rank_known && shape.rank() == 4 && shape.dims[1].is_static() && shape.dims[2].is_static() &&
      shape.dims[3].is_static())
    options.image_shape = {shape.dims[1].value(), shape.dims[2].value(), shape.dims[3].value()};
  for (size_t i = 1; i < model.inputs.size(); ++i) {
    const Value& extra = model.value(model.inputs[i]);
    options.extra_inputs.push_back({extra.name, extra.dtype});
  }
  return options;
}

void check_data_fits_model(const Dataset& data, const Graph& model) {
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    const Value& v = model.value(model.inputs[i]);
    check_matches_model_input(i == 0 ? data.inputs : data.extra_inputs.at(i - 1).second, v.name, v.shape, v.dtype);
  }
}

}  // namespace onnxtrain::cli
