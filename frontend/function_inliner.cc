// Inlining of model-local functions (FunctionProto in ModelProto.functions), which PyTorch's dynamo
// exporter and hand-built models use. Debian's ONNX 1.12 has no inliner of its own.
#include <map>
#include <set>

#include "frontend/model_file.h"
#include "graph/error.h"

namespace onnxtrain {

namespace {

using FunctionKey = std::pair<std::string, std::string>;  // (domain, name)

// Body of `function` as called by `call`, with inner values renamed under `prefix`.
std::vector<onnx::NodeProto> expand_call(const onnx::NodeProto& call, const onnx::FunctionProto& function,
                                         const std::string& prefix) {
  std::map<std::string, std::string> rename;
  for (int i = 0; i < function.input_size(); ++i)
    rename[function.input(i)] = i < call.input_size() ? call.input(i) : "";
  for (int i = 0; i < function.output_size(); ++i) {
    rename[function.output(i)] = i < call.output_size() ? call.output(i) : prefix + function.output(i);
  }
  std::map<std::string, const onnx::AttributeProto*> call_attributes;
  for (const auto& attr : call.attribute()) call_attributes[attr.name()] = &attr;

  auto mapped = [&](const std::string& name) {
    if (name.empty()) return name;
    auto it = rename.find(name);
    return it != rename.end() ? it->second : prefix + name;
  };
  std::vector<onnx::NodeProto> body;
  for (const auto& inner : function.node()) {
    onnx::NodeProto node = inner;
    node.set_name(prefix + (inner.name().empty() ? inner.op_type() : inner.name()));
    for (auto& in : *node.mutable_input()) in = mapped(in);
    for (auto& out : *node.mutable_output()) out = mapped(out);
    node.clear_attribute();
    for (const auto& attr : inner.attribute()) {
      if (attr.ref_attr_name().empty()) {
        *node.add_attribute() = attr;
        continue;
      }
      // An attribute reference takes the caller's value; without one the op's default applies.
      auto it = call_attributes.find(attr.ref_attr_name());
      if (it == call_attributes.end()) continue;
      onnx::AttributeProto resolved = *it->second;
      resolved.set_name(attr.name());
      *node.add_attribute() = resolved;
    }
    body.push_back(std::move(node));
  }
  return body;
}

}  // namespace

int inline_local_functions(onnx::ModelProto& model) {
  if (model.functions_size() == 0) return 0;
  std::map<FunctionKey, const onnx::FunctionProto*> functions;
  for (const auto& f : model.functions()) functions[{f.domain(), f.name()}] = &f;

  int inlined = 0;
  constexpr int kMaxDepth = 64;  // deeper nesting than this is a recursive definition
  auto* graph = model.mutable_graph();
  for (int depth = 0;; ++depth) {
    bool changed = false;
    google::protobuf::RepeatedPtrField<onnx::NodeProto> expanded;
    for (const auto& node : graph->node()) {
      auto it = functions.find({node.domain(), node.op_type()});
      if (it == functions.end()) {
        *expanded.Add() = node;
        continue;
      }
      if (depth >= kMaxDepth) {
        throw Error("model-local function '" + node.domain() + "." + node.op_type() + "' is nested more than " +
                    std::to_string(kMaxDepth) + " levels deep (recursive definition?)");
      }
      std::string prefix = (node.name().empty() ? node.op_type() + "_" + std::to_string(inlined) : node.name()) + "/";
      for (auto& inner : expand_call(node, *it->second, prefix)) *expanded.Add() = std::move(inner);
      ++inlined;
      changed = true;
    }
    graph->mutable_node()->Swap(&expanded);
    if (!changed) break;
  }

  // The functions' own domains are no longer imported by any node.
  std::set<std::string> used;
  for (const auto& node : graph->node()) used.insert(node.domain());
  std::set<std::string> function_domains;
  for (const auto& [key, f] : functions) function_domains.insert(key.first);
  google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto> opsets;
  for (const auto& opset : model.opset_import()) {
    if (!function_domains.count(opset.domain()) || used.count(opset.domain())) *opsets.Add() = opset;
  }
  model.mutable_opset_import()->Swap(&opsets);
  model.clear_functions();
  return inlined;
}

}  // namespace onnxtrain
