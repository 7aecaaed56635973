#include "graph/autodiff/gradient_rule.h"
#include "graph/autodiff/training_graph_builder.h"
#include "graph/error.h"

namespace onnxtrain {

GradientContext::GradientContext(TrainingGraphBuilder& builder, NodeId node)
    : builder_(builder), node_id_(node), node_(builder.graph().node(node)) {}

const Graph& GradientContext::graph() const { return builder_.graph(); }

bool GradientContext::needs_grad(size_t i) const {
  return has_input(i) && builder_.differentiable_input(node(), i) && builder_.requires_grad(input(i));
}

ValueId GradientContext::output_grad(size_t i) {
  if (i >= node().outputs.size() || !output(i).valid()) return {};
  return builder_.gradient_of(output(i));
}

std::vector<ValueId> GradientContext::output_grad_parts(size_t i) {
  if (i >= node().outputs.size() || !output(i).valid()) return {ValueId{}};
  return builder_.gradient_parts_of(output(i));
}

ValueId GradientContext::output_grad_or_zeros(size_t i) {
  ValueId g = output_grad(i);
  if (g.valid()) return g;
  ValueId out = require_output(i);
  Tensor zero(dtype(out), {1});
  return emit("ConstantOfShape", {shape_of(out)}, {{"value", zero}});
}

void GradientContext::add_input_grad(size_t i, ValueId grad) {
  if (!needs_grad(i)) return;
  ONNXTRAIN_CHECK(grad.valid(), node().op_type + " gradient rule gave an invalid gradient");
  builder_.add_contribution(input(i), grad);
}

void GradientContext::add_broadcast_input_grad(size_t i, ValueId grad) {
  if (!needs_grad(i)) return;
  add_input_grad(i, reduce_to_shape_of(grad, input(i)));
}

ValueId GradientContext::require_output(size_t i) {
  Graph& g = builder_.graph();
  if (i < node().outputs.size() && output(i).valid()) return output(i);
  ValueId v =
      g.add_value({.name = builder_.unique_name(node().name + "_output" + std::to_string(i)), .producer = node_id_});
  Node& n = g.node(node_id_);
  if (n.outputs.size() <= i) n.outputs.resize(i + 1);
  n.outputs[i] = v;
  const OpSchema* schema = OpRegistry::builtin().find(n.domain, n.op_type);
  ONNXTRAIN_CHECK(schema, "no schema for " + n.op_type);
  infer_node(g, node_id_, *schema);
  node_ = n;
  return v;
}

std::vector<ValueId> GradientContext::emit(const std::string& op_type, std::vector<ValueId> inputs,
                                           Attributes attributes, std::vector<bool> outputs,
                                           const std::string& domain) {
  return builder_.emit(node_id_, op_type, domain, std::move(inputs), std::move(attributes), std::move(outputs));
}

ValueId GradientContext::emit(const std::string& op_type, std::vector<ValueId> inputs, Attributes attributes) {
  return emit(op_type, std::move(inputs), std::move(attributes), {true}, "")[0];
}

ValueId GradientContext::emit_training(const std::string& op_type, std::vector<ValueId> inputs, Attributes attributes) {
  return emit(op_type, std::move(inputs), std::move(attributes), {true}, kTrainingDomain)[0];
}

ValueId GradientContext::constant(Tensor tensor) { return builder_.add_constant(std::move(tensor), node().name); }

ValueId GradientContext::int64s(const std::vector<int64_t>& values) { return constant(Tensor::vector_int64(values)); }

ValueId GradientContext::scalar(double value, DType dtype) {
  Tensor t(dtype, {});
  if (dtype == DType::Float64) {
    t.data<double>()[0] = value;
  } else {
    ONNXTRAIN_CHECK(dtype == DType::Float32, "scalar constants are float32 or float64");
    t.data<float>()[0] = static_cast<float>(value);
  }
  return constant(std::move(t));
}

ValueId GradientContext::shape_of(ValueId v) {
  const Shape& s = shape(v);
  if (s.rank_known && s.is_static()) return int64s(s.static_sizes());
  return emit("Shape", {v});
}

ValueId GradientContext::reduce_to_shape_of(ValueId grad, ValueId like) {
  const Shape& from = shape(grad);
  const Shape& to = shape(like);
  if (!from.rank_known || !to.rank_known || to.rank() > from.rank()) {
    fail("cannot reduce a gradient of shape " + from.to_string() + " to its input's shape " + to.to_string());
  }
  const int64_t leading = from.rank() - to.rank();
  std::vector<int64_t> axes;
  for (int64_t a = 0; a < leading; ++a) axes.push_back(a);
  bool keeps_dims = false;  // some reduced axis is one of `like`'s own (size 1) dims
  for (int64_t j = 0; j < to.rank(); ++j) {
    const Dim& t = to.dims[j];
    const Dim& f = from.dims[leading + j];
    if (t == f) continue;
    if (t.is_static() && t.value() == 1) {
      axes.push_back(leading + j);
      keeps_dims = true;
      continue;
    }
    fail("cannot tell whether dimension " + std::to_string(j) + " of an input shaped " + to.to_string() +
         " was broadcast to " + from.to_string());
  }
  if (axes.empty()) return grad;
  if (!keeps_dims) return emit("ReduceSum", {grad, int64s(axes)}, {{"keepdims", int64_t{0}}});
  ValueId summed = emit("ReduceSum", {grad, int64s(axes)}, {{"keepdims", int64_t{1}}});
  if (leading == 0) return summed;
  std::vector<int64_t> lead_axes(axes.begin(), axes.begin() + leading);
  return emit("Squeeze", {summed, int64s(lead_axes)});
}

void GradientContext::fail(const std::string& message) const {
  const Node& n = node();
  throw Error(n.op_type + " gradient: " + message).at_node(n.name, n.op_type, n.domain, n.opset);
}

void GradientRegistry::add(const std::string& domain, const std::string& op_type, GradientRule rule) {
  const bool inserted = rules_.emplace(std::make_pair(domain, op_type), rule).second;
  ONNXTRAIN_CHECK(inserted, "two gradient rules for " + op_type);
}

GradientRule GradientRegistry::find(const std::string& domain, const std::string& op_type) const {
  auto it = rules_.find({domain, op_type});
  return it == rules_.end() ? nullptr : it->second;
}

std::vector<std::pair<std::string, std::string>> GradientRegistry::ops() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, rule] : rules_) out.push_back(key);
  return out;
}

}  // namespace onnxtrain
