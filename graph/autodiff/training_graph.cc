#include "graph/autodiff/training_graph.h"

#include <algorithm>

#include "graph/autodiff/training_graph_builder.h"
#include "graph/error.h"
#include "graph/op_schema.h"

namespace onnxtrain {

void TrainingGraphBuilder::mark_requires_grad(ValueId v) {
  if (requires_grad_.size() <= v.index) requires_grad_.resize(v.index + 1, false);
  requires_grad_[v.index] = true;
}

// Float inputs of a data or weight slot carry gradients; shapes, indices, masks and BN state never do.
bool TrainingGraphBuilder::differentiable_input(const Node& node, size_t i) const {
  if (!node.has_input(i) || !is_floating(result_.graph.value(node.inputs[i]).dtype)) return false;
  const OpSchema* schema = OpRegistry::builtin().find(node.domain, node.op_type);
  if (!schema) return false;
  const InputKind kind = schema->input_kind(i);
  return kind == InputKind::Data || kind == InputKind::Weight;
}

void TrainingGraphBuilder::add_contribution(ValueId v, ValueId grad) {
  if (contributions_.size() <= v.index) {
    contributions_.resize(v.index + 1);
    summed_.resize(v.index + 1, false);
  }
  ONNXTRAIN_CHECK(!summed_[v.index], "gradient of '" + graph().value(v).name + "' grew after it was used");
  contributions_[v.index].push_back(grad);
}

ValueId TrainingGraphBuilder::gradient_of(ValueId v) {
  if (contributions_.size() <= v.index || contributions_[v.index].empty()) return {};
  std::vector<ValueId>& parts = contributions_[v.index];
  if (parts.size() > 1) {
    NodeId producer = graph().value(v).producer;  // the Sum belongs to the node that made the value
    ValueId sum = concat_of_gathered_slices(producer, v, parts);
    if (!sum.valid()) sum = emit(producer, "Sum", "", parts, {}, {true})[0];
    parts = {sum};
  }
  summed_[v.index] = true;
  return parts[0];
}

std::vector<ValueId> TrainingGraphBuilder::gradient_parts_of(ValueId v) {
  if (contributions_.size() > v.index && contributions_[v.index].size() == 2) {
    summed_[v.index] = true;
    return contributions_[v.index];
  }
  return {gradient_of(v)};
}

std::string TrainingGraphBuilder::unique_name(const std::string& base) {
  if (!names_loaded_) {
    for (size_t i = 0; i < graph().value_count(); ++i)
      names_.insert(graph().value(ValueId{static_cast<uint32_t>(i)}).name);
    for (NodeId n : graph().order()) names_.insert(graph().node(n).name);
    names_loaded_ = true;
  }
  std::string name = base;
  for (int k = 1; names_.count(name); ++k) name = base + "_" + std::to_string(k);
  names_.insert(name);
  return name;
}

std::vector<ValueId> TrainingGraphBuilder::emit(NodeId for_node, const std::string& op_type, const std::string& domain,
                                                std::vector<ValueId> inputs, Attributes attributes,
                                                std::vector<bool> outputs) {
  Graph& g = graph();
  const OpSchema* schema = OpRegistry::builtin().find(domain, op_type);
  ONNXTRAIN_CHECK(schema, "a gradient rule emits " + domain + "::" + op_type + ", which has no schema");
  const std::string owner = for_node.valid() ? g.node(for_node).name : std::string("loss");
  const std::string base = owner + "_grad/" + op_type;
  Node node{.name = unique_name(base),
            .op_type = op_type,
            .domain = domain,
            .opset = domain.empty() ? kBackwardOnnxOpset : 1,
            .inputs = std::move(inputs),
            .attributes = std::move(attributes)};
  for (size_t i = 0; i < outputs.size(); ++i) {
    node.outputs.push_back(outputs[i] ? g.add_value({.name = unique_name(base + "_out" + std::to_string(i))})
                                      : ValueId{});
  }
  std::vector<ValueId> result = node.outputs;
  NodeId id = g.add_node(std::move(node));
  infer_node(g, id, *schema);
  if (result_.emitted_for.size() <= id.index) result_.emitted_for.resize(id.index + 1);
  result_.emitted_for[id.index] = for_node;
  return result;
}

ValueId TrainingGraphBuilder::add_constant(Tensor tensor, const std::string& hint) {
  Graph& g = graph();
  ValueId v = g.add_value({.name = unique_name(hint + "_grad/const"),
                           .dtype = tensor.dtype(),
                           .shape = Shape::of(tensor.sizes()),
                           .role = ValueRole::Constant,
                           .data = tensor});
  if (tensor.dtype() == DType::Int64 && tensor.rank() <= 1 && tensor.numel() <= 64) {
    std::vector<Dim> known;
    for (int64_t x : tensor.to_int64()) known.emplace_back(x);
    g.value(v).known = std::move(known);
  }
  g.initializers.push_back(v);
  return v;
}

namespace {

ValueId find_or_fail(const Graph& g, const std::string& name, const std::string& what) {
  std::optional<ValueId> v = g.find_value(name);
  if (!v) throw Error("the graph has no value named '" + name + "' (the " + what + ")");
  if (!is_floating(g.value(*v).dtype)) {
    throw Error("the " + what + " '" + name + "' is " + std::string(dtype_name(g.value(*v).dtype)) +
                "; only float tensors are differentiated");
  }
  return *v;
}

std::vector<ValueId> default_wrt(const Graph& g) {
  std::vector<ValueId> wrt;
  for (ValueId v : g.initializers)
    if (g.value(v).role == ValueRole::Parameter && !g.value(v).frozen) wrt.push_back(v);
  return wrt;
}

// The gradient of the loss with respect to itself: ones shaped like the loss.
ValueId seed_gradient(TrainingGraphBuilder& builder, ValueId loss) {
  const Value& l = builder.graph().value(loss);
  if (l.shape.rank_known && l.shape.is_static()) {
    Tensor ones(l.dtype, l.shape.static_sizes());
    if (l.dtype == DType::Float64)
      std::fill(ones.data<double>().begin(), ones.data<double>().end(), 1.0);
    else if (l.dtype == DType::Float32)
      std::fill(ones.data<float>().begin(), ones.data<float>().end(), 1.0f);
    else
      throw Error("the loss '" + l.name + "' must be float32 or float64");
    return builder.add_constant(ones, l.name);
  }
  Tensor one(l.dtype, {1});
  if (l.dtype == DType::Float64)
    one.data<double>()[0] = 1.0;
  else
    one.data<float>()[0] = 1.0f;
  ValueId shape = builder.emit({}, "Shape", "", {loss}, {}, {true})[0];
  return builder.emit({}, "ConstantOfShape", "", {shape}, {{"value", one}}, {true})[0];
}

// The value that the caller sees as `<name>_grad`: renamed when it is a fresh value of its own, else a
// copy (the same value can be the gradient of two inputs of an Add).
ValueId name_gradient(TrainingGraphBuilder& builder, ValueId value, ValueId grad, std::set<uint32_t>& claimed,
                      size_t forward_values) {
  Graph& g = builder.graph();
  const std::string name = builder.unique_name(g.value(value).name + "_grad");
  if (grad.index >= forward_values && g.value(grad).role == ValueRole::Activation && !claimed.count(grad.index)) {
    g.value(grad).name = name;
    claimed.insert(grad.index);
    return grad;
  }
  ValueId copy = builder.emit(g.value(value).producer, "Identity", "", {grad}, {}, {true})[0];
  g.value(copy).name = name;
  claimed.insert(copy.index);
  return copy;
}

}  // namespace

TrainingGraph build_training_graph(const Graph& forward, const TrainingGraphOptions& options) {
  TrainingGraph result;
  result.graph = forward;
  Graph& g = result.graph;
  TrainingGraphBuilder builder(result);
  result.loss = find_or_fail(g, options.loss, "loss");

  std::vector<ValueId> wrt;
  for (const std::string& name : options.wrt) wrt.push_back(find_or_fail(g, name, "value to differentiate"));
  if (options.wrt.empty()) wrt = default_wrt(g);
  if (wrt.empty()) throw Error("the graph has no trainable parameters (all frozen, or none is a float initializer)");

  const std::vector<NodeId> forward_order = g.order();
  const size_t forward_values = g.value_count();
  result.forward_node_count = forward_order.size();

  // Forward sweep: which values depend on a trained value through differentiable inputs.
  for (ValueId v : wrt) builder.mark_requires_grad(v);
  std::vector<bool> active(forward_order.size(), false);
  for (size_t k = 0; k < forward_order.size(); ++k) {
    const Node& node = g.node(forward_order[k]);
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (builder.differentiable_input(node, i) && builder.requires_grad(node.inputs[i])) active[k] = true;
    if (!active[k]) continue;
    for (ValueId out : node.outputs)
      if (out.valid() && is_floating(g.value(out).dtype)) builder.mark_requires_grad(out);
  }
  if (!builder.requires_grad(result.loss)) {
    throw Error("the loss '" + options.loss + "' does not depend on any value being trained");
  }

  // Backward sweep: rules in reverse topological order, each after every consumer of its outputs.
  builder.add_contribution(result.loss, seed_gradient(builder, result.loss));
  std::vector<bool> reached(forward_values, false);
  reached[result.loss.index] = true;
  for (size_t k = forward_order.size(); k-- > 0;) {
    if (!active[k]) continue;
    const NodeId id = forward_order[k];
    const Node& node = g.node(id);
    bool has_grad = false;
    for (ValueId out : node.outputs) has_grad |= out.valid() && out.index < forward_values && reached[out.index];
    if (!has_grad) continue;
    GradientRule rule = GradientRegistry::builtin().find(node.domain, node.op_type);
    if (!rule) {
      throw Error("no gradient rule for " + (node.domain.empty() ? std::string() : node.domain + "::") + node.op_type +
                  " yet; the loss depends on a trained value through it")
          .at_node(node.name, node.op_type, node.domain, node.opset);
    }
    GradientContext ctx(builder, id);
    rule(ctx);
    const Node& after = g.node(id);  // the rule may have added outputs
    for (size_t i = 0; i < after.inputs.size(); ++i)
      if (ctx.needs_grad(i)) reached[after.inputs[i].index] = true;
  }

  std::set<uint32_t> claimed;
  for (ValueId v : wrt) {
    ValueId grad = reached[v.index] ? builder.gradient_of(v) : ValueId{};
    if (!grad.valid()) {
      result.unreachable.push_back(g.value(v).name);
      continue;
    }
    result.gradients.push_back({v, name_gradient(builder, v, grad, claimed, forward_values)});
  }
  if (result.gradients.empty())
    throw Error("the loss '" + options.loss + "' depends on none of the values being trained");

  if (std::find(g.outputs.begin(), g.outputs.end(), result.loss) == g.outputs.end()) g.outputs.push_back(result.loss);
  for (const TrainingGraph::Gradient& gr : result.gradients) g.outputs.push_back(gr.gradient);
  uint32_t node_slots = 0;
  for (NodeId n : g.order()) node_slots = std::max(node_slots, n.index + 1);
  result.emitted_for.resize(node_slots);
  return result;
}

}  // namespace onnxtrain
