#include "tools/model_import.h"

#include <algorithm>

namespace onnxtrain::cli {

ImportedModel import_for_costs(const std::string& path, int64_t seq_len, ImportOptions options) {
  ImportedModel model = import_model(path, options);
  if (seq_len <= 0 || model.graph.inputs.empty()) return model;
  const Shape& shape = model.graph.value(model.graph.inputs[0]).shape;
  if (!shape.rank_known) return model;
  options.dims = data_input_bindings(model.graph, std::vector<int64_t>(shape.dims.size(), seq_len));
  return options.dims.empty() ? model : import_model(path, options);
}

namespace {

// The static leading dim of a value of rank 2 or more, if it has one.
std::optional<int64_t> static_batch_of(const Shape& shape) {
  if (!shape.rank_known || shape.rank() < 2 || !shape.dims[0].is_static()) return std::nullopt;
  return shape.dims[0].value();
}

// The first node (in graph order) that turns the data input's symbolic batch into a number: one that
// reads a value led by that symbol and writes a value of rank 2 or more led by a number. Shape and its
// like write rank-1 values and are never it. Null when no node does.
const Node* node_fixing_the_batch(const Graph& model) {
  const Dim& batch = model.value(model.inputs[0]).shape.dims[0];
  for (NodeId id : model.order()) {
    const Node& n = model.node(id);
    const bool reads_batch = std::ranges::any_of(n.inputs, [&](ValueId v) {
      if (!v.valid()) return false;
      const Shape& s = model.value(v).shape;
      return s.rank_known && s.rank() >= 1 && s.dims[0] == batch;
    });
    if (reads_batch && std::ranges::any_of(n.outputs, [&](ValueId v) {
          return v.valid() && static_batch_of(model.value(v).shape).has_value();
        }))
      return &n;
  }
  return nullptr;
}

}  // namespace

std::optional<int64_t> fixed_batch(const Graph& model) {
  if (model.inputs.empty()) return std::nullopt;
  const Shape& input = model.value(model.inputs[0]).shape;
  if (!input.rank_known || input.rank() < 2) return std::nullopt;
  if (input.dims[0].is_static()) return input.dims[0].value();
  if (!input.dims[0].is_symbolic() || model.outputs.empty()) return std::nullopt;
  return static_batch_of(model.value(model.outputs[0]).shape);
}

std::string fixed_batch_text(const std::string& path, const Graph& model, const std::string& what) {
  const Value& input = model.value(model.inputs.at(0));
  const std::string batch = std::to_string(*fixed_batch(model));
  if (input.shape.dims[0].is_static()) {
    return path + " was exported with a fixed batch of " + batch + " (input '" + input.name + "' is " +
           input.shape.to_string() + "): " + what + ". Or export it with a dynamic batch " +
           "axis: torch.onnx.export(..., dynamic_axes={'" + input.name + "': {0: 'batch'}}), or with dynamo=True, " +
           "dynamic_shapes=({0: torch.export.Dim('batch')},)";
  }
  const Value& output = model.value(model.outputs.at(0));
  const Node* fixing = node_fixing_the_batch(model);
  return path + " fixes the batch to " + batch + " inside the graph: its input '" + input.name + "' is " +
         input.shape.to_string() + ", but its output '" + output.name + "' is " + output.shape.to_string() +
         (fixing ? ", from node '" + fixing->name + "' (" + fixing->op_type +
                       ") on, whose constant sizes include the batch"
                 : "") +
         ": " + what + ". Or export it so that no node's sizes are constants over the batch axis " +
         "(take them from the input's shape, as a dynamic batch axis does)";
}

std::string batch_not_on_the_first_axis(const std::string& path, const Graph& model) {
  if (model.inputs.empty() || model.outputs.empty()) return {};
  const Value& input = model.value(model.inputs[0]);
  const Shape& in = input.shape;
  const Shape& out = model.value(model.outputs[0]).shape;
  if (!in.rank_known || in.rank() < 2 || !in.dims[0].is_static()) return {};
  if (!out.rank_known || out.rank() < 1 || !out.dims[0].is_symbolic()) return {};
  for (size_t axis = 1; axis < in.dims.size(); ++axis) {
    if (in.dims[axis] != out.dims[0]) continue;
    return path + " reads its batch along axis " + std::to_string(axis) + " of input '" + input.name + "' " +
           in.to_string() + " (its output '" + model.value(model.outputs[0]).name + "' is " + out.to_string() +
           "), but onnxtrain reads samples along a data input's first axis. Export it batch-first: " +
           "nn.LSTM/nn.GRU(..., batch_first=True), or a transpose inside forward(), with dynamic_axes={'" + input.name +
           "': {0: 'batch'}}";
  }
  return {};
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
