#include "frontend/bake_preprocessing.h"

#include <onnx/onnx_pb.h>

#include <set>

#include "frontend/dataset.h"
#include "graph/error.h"

namespace onnxtrain {

namespace {

void collect_names(const onnx::GraphProto& graph, std::set<std::string>& names) {
  for (const auto& v : graph.input()) names.insert(v.name());
  for (const auto& t : graph.initializer()) names.insert(t.name());
  for (const auto& node : graph.node()) {
    for (const std::string& out : node.output()) names.insert(out);
    for (const auto& attribute : node.attribute())
      if (attribute.has_g()) collect_names(attribute.g(), names);
  }
}

// Every reading of `from` by a node, also inside subgraphs (If/Loop bodies read outer values by name).
void rename_uses(onnx::GraphProto& graph, const std::string& from, const std::string& to) {
  for (auto& node : *graph.mutable_node()) {
    for (std::string& in : *node.mutable_input())
      if (in == from) in = to;
    for (auto& attribute : *node.mutable_attribute())
      if (attribute.has_g()) rename_uses(*attribute.mutable_g(), from, to);
  }
}

}  // namespace

int bake_preprocessing(onnx::ModelProto& model, const InputPreprocessing& p, const std::string& source) {
  onnx::GraphProto& graph = *model.mutable_graph();
  onnx::ValueInfoProto* input = nullptr;
  for (auto& v : *graph.mutable_input())
    if (v.name() == p.input) input = &v;
  if (!input) throw Error(source + ": --bake-normalization: the model has no graph input '" + p.input + "'");
  auto* tensor_type = input->mutable_type()->mutable_tensor_type();
  if (tensor_type->elem_type() != onnx::TensorProto::FLOAT) {
    throw Error(source + ": --bake-normalization: the input '" + p.input +
                "' is not float32 (token ids and other integer inputs are never normalised)");
  }
  for (const auto& output : graph.output()) {
    if (output.name() == p.input)
      throw Error(source + ": --bake-normalization: the input '" + p.input + "' is also a graph output");
  }
  const bool normalised = !p.mean.empty();
  if (!p.raw_uint8 && p.scale == 1.0f && !normalised) return 0;
  const int rank = tensor_type->has_shape() ? tensor_type->shape().dim_size() : -1;
  const int64_t channels = static_cast<int64_t>(p.mean.size());
  if (normalised && (p.std.size() != p.mean.size() || (channels > 1 && rank < 2))) {
    throw Error(source + ": --bake-normalization: " + std::to_string(channels) +
                " channel statistics do not fit the input '" + p.input + "' of rank " + std::to_string(rank));
  }

  std::set<std::string> taken;
  collect_names(graph, taken);
  auto fresh = [&](const std::string& base) {
    std::string name = base;
    for (int i = 1; taken.count(name); ++i) name = base + "_" + std::to_string(i);
    taken.insert(name);
    return name;
  };
  auto add_constant = [&](const std::string& base, const std::vector<float>& values, bool per_channel) {
    onnx::TensorProto* t = graph.add_initializer();
    t->set_name(fresh(base));
    t->set_data_type(onnx::TensorProto::FLOAT);
    if (per_channel) {
      for (int d = 0; d < rank; ++d) t->add_dims(d == 1 ? static_cast<int64_t>(values.size()) : 1);
    }
    for (float v : values) t->add_float_data(v);
    return t->name();
  };

  std::vector<onnx::NodeProto> inserted;
  std::string current = p.input;
  auto add_node = [&](const std::string& op, const std::vector<std::string>& inputs) {
    onnx::NodeProto node;
    node.set_op_type(op);
    node.set_name(fresh("onnxtrain_preprocess/" + op));
    for (const std::string& in : inputs) node.add_input(in);
    current = fresh(p.input + "/preprocess/" + op);
    node.add_output(current);
    inserted.push_back(node);
    return &inserted.back();
  };
  if (p.raw_uint8) {
    onnx::AttributeProto* to = add_node("Cast", {current})->add_attribute();
    to->set_name("to");
    to->set_type(onnx::AttributeProto::INT);
    to->set_i(onnx::TensorProto::FLOAT);
    tensor_type->set_elem_type(onnx::TensorProto::UINT8);
  }
  if (p.scale != 1.0f) add_node("Mul", {current, add_constant("onnxtrain_preprocess_scale", {p.scale}, false)});
  if (normalised) {
    add_node("Sub", {current, add_constant("onnxtrain_preprocess_mean", p.mean, channels > 1)});
    add_node("Div", {current, add_constant("onnxtrain_preprocess_std", p.std, channels > 1)});
  }
  // The model's nodes now read `current`; the inserted ones (the first reads the raw input) go first.
  rename_uses(graph, p.input, current);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (onnx::NodeProto& node : inserted) *nodes.Add() = std::move(node);
  for (onnx::NodeProto& node : *graph.mutable_node()) *nodes.Add() = std::move(node);
  graph.mutable_node()->Swap(&nodes);
  return static_cast<int>(inserted.size());
}

std::map<std::string, std::string> baked_preprocessing_metadata(std::map<std::string, std::string> metadata,
                                                                const InputPreprocessing& p) {
  std::string applied = "x = raw";
  if (p.raw_uint8) applied = "x = float(raw)";
  if (p.scale != 1.0f) applied += " * " + full_precision_list({p.scale});
  if (!p.mean.empty())
    applied = "x = (" + applied.substr(4) + " - mean[c]) / std[c], mean " + full_precision_list(p.mean) + ", std " +
              full_precision_list(p.std);
  metadata["onnxtrain.preprocess"] = "none: feed raw " + std::string(p.raw_uint8 ? "uint8" : "float32") +
                                     " values (the model's first nodes apply the training run's preprocessing)";
  metadata["onnxtrain.preprocess.baked"] = applied;
  metadata["onnxtrain.preprocess.scale"] = "1";
  metadata.erase("onnxtrain.preprocess.mean");
  metadata.erase("onnxtrain.preprocess.std");
  return metadata;
}

}  // namespace onnxtrain
