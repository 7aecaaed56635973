#include "graph/op_schema.h"

#include <algorithm>

#include "graph/error.h"
#include "graph/ops/ops.h"

namespace onnxtrain {

const Value& InferContext::input(size_t i) const {
  ONNXTRAIN_CHECK(has_input(i), "input " + std::to_string(i) + " of " + node().op_type + " is absent");
  return graph_.value(node().inputs[i]);
}

const Tensor* InferContext::input_constant(size_t i) const {
  if (!has_input(i)) return nullptr;
  const Value& v = input(i);
  if (!v.data || (v.role != ValueRole::Constant && v.role != ValueRole::Buffer)) return nullptr;
  return &*v.data;
}

std::optional<std::vector<Dim>> InferContext::input_known(size_t i) const {
  if (!has_input(i)) return std::nullopt;
  const Value& v = input(i);
  if (v.known) return v.known;
  const Tensor* t = input_constant(i);
  if (t && t->rank() <= 1 && (is_integer(t->dtype()) || t->dtype() == DType::Bool) && t->numel() <= 64) {
    std::vector<Dim> dims;
    for (int64_t x : t->to_int64()) dims.emplace_back(x);
    return dims;
  }
  return std::nullopt;
}

std::vector<int64_t> FoldContext::input_ints(size_t i) const {
  const DType dtype = inputs.at(i).dtype();
  if (!is_integer(dtype) && dtype != DType::Bool) {
    throw Error(node.op_type + ": input " + std::to_string(i) + " must be an integer tensor, got " +
                std::string(dtype_name(dtype)))
        .at_node(node.name, node.op_type, node.domain, node.opset);
  }
  return inputs[i].to_int64();
}

std::optional<std::vector<int64_t>> InferContext::input_ints(size_t i) const {
  if (const Tensor* t = input_constant(i); t && (is_integer(t->dtype()) || t->dtype() == DType::Bool)) {
    return t->to_int64();
  }
  auto known = input_known(i);
  if (!known) return std::nullopt;
  std::vector<int64_t> values;
  for (const Dim& d : *known) {
    if (!d.is_static()) return std::nullopt;
    values.push_back(d.value());
  }
  return values;
}

void InferContext::set_output(size_t i, DType dtype, Shape shape) {
  if (!has_output(i)) return;
  Value& v = graph_.value(node().outputs[i]);
  v.dtype = dtype;
  v.shape = std::move(shape);
}

void InferContext::set_output_known(size_t i, std::vector<Dim> values) {
  if (!has_output(i)) return;
  graph_.value(node().outputs[i]).known = std::move(values);
}

void InferContext::fail(const std::string& message) const {
  const Node& n = node();
  throw Error(message).at_node(n.name, n.op_type, n.domain, n.opset);
}

int64_t CostContext::input_numel(size_t i) const { return i < inputs.size() ? inputs[i].numel().value_or(0) : 0; }

int64_t CostContext::output_numel(size_t i) const { return i < outputs.size() ? outputs[i].numel().value_or(0) : 0; }

InputKind OpSchema::input_kind(size_t i) const {
  if (input_kinds.empty()) return InputKind::Data;
  return i < input_kinds.size() ? input_kinds[i] : input_kinds.back();
}

void OpRegistry::add(OpSchema schema) {
  auto key = std::make_pair(schema.domain, schema.op_type);
  ONNXTRAIN_CHECK(!schemas_.count(key), "op registered twice: " + schema.op_type);
  schemas_.emplace(key, std::move(schema));
}

const OpSchema* OpRegistry::find(const std::string& domain, const std::string& op_type) const {
  const std::string& d = domain == "ai.onnx" ? std::string() : domain;
  auto it = schemas_.find({d, op_type});
  return it == schemas_.end() ? nullptr : &it->second;
}

std::vector<const OpSchema*> OpRegistry::all() const {
  std::vector<const OpSchema*> list;
  for (const auto& [key, schema] : schemas_) list.push_back(&schema);
  return list;
}

const OpRegistry& OpRegistry::builtin() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_builtin_ops(r);
    return r;
  }();
  return registry;
}

void infer_node(Graph& graph, NodeId id, const OpSchema& schema) {
  InferContext ctx(graph, id);
  const Node& node = graph.node(id);
  int given = 0;
  for (size_t i = 0; i < node.inputs.size(); ++i) given = node.inputs[i].valid() ? static_cast<int>(i) + 1 : given;
  if (given < schema.min_inputs || (schema.max_inputs >= 0 && given > schema.max_inputs)) {
    ctx.fail("expects " + std::to_string(schema.min_inputs) +
             (schema.max_inputs == schema.min_inputs ? ""
              : schema.max_inputs < 0                ? " or more"
                                                     : " to " + std::to_string(schema.max_inputs)) +
             " inputs, got " + std::to_string(given));
  }
  // Positions below min_inputs are required: an empty name there ("" in the model) is not an omitted
  // optional input, and the op's inference would read a value that does not exist.
  for (int i = 0; i < std::min(given, schema.min_inputs); ++i) {
    if (!node.has_input(static_cast<size_t>(i))) ctx.fail("input " + std::to_string(i) + " is required but empty");
  }
  int outputs = static_cast<int>(node.outputs.size());
  if (outputs < schema.min_outputs || outputs > schema.max_outputs) {
    ctx.fail("expects " + std::to_string(schema.min_outputs) + " to " + std::to_string(schema.max_outputs) +
             " outputs, got " + std::to_string(outputs));
  }
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i].valid() && graph.value(node.inputs[i]).dtype == DType::Undefined) {
      ctx.fail("input " + std::to_string(i) + " ('" + graph.value(node.inputs[i]).name + "') has no known type");
    }
  }
  try {
    schema.infer(ctx);
  } catch (Error& e) {  // Dim arithmetic's overflow, for one, does not know the node it ran for
    e.at_node(node.name, node.op_type, node.domain, node.opset);
    throw;
  }
}

OpCost node_cost(const Graph& graph, NodeId id, const OpSchema& schema, const SymbolBindings& bindings) {
  const Node& node = graph.node(id);
  CostContext ctx{node, {}, {}};
  for (ValueId in : node.inputs)
    ctx.inputs.push_back(in.valid() ? graph.value(in).shape.bind(bindings) : Shape::unknown_rank());
  for (ValueId out : node.outputs)
    ctx.outputs.push_back(out.valid() ? graph.value(out).shape.bind(bindings) : Shape::unknown_rank());
  if (schema.cost) return schema.cost(ctx);
  double n = static_cast<double>(ctx.output_numel(0));
  return {n, 2 * n};
}

}  // namespace onnxtrain
