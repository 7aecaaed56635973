#include "graph/autodiff/loss.h"

#include <algorithm>
#include <set>

#include "graph/error.h"
#include "graph/op_schema.h"

namespace onnxtrain {

namespace {

constexpr int kLossOpset = 17;

// Adds the loss nodes to the graph with fresh names, each shape-inferred as it is added.
class LossNodes {
 public:
  explicit LossNodes(Graph& graph) : graph_(graph) {
    for (size_t i = 0; i < graph.value_count(); ++i) taken_.insert(graph.value(ValueId{static_cast<uint32_t>(i)}).name);
    for (NodeId n : graph.order()) taken_.insert(graph.node(n).name);
  }

  std::string fresh_name(const std::string& base) {
    std::string name = base;
    for (int k = 1; taken_.count(name); ++k) name = base + "_" + std::to_string(k);
    taken_.insert(name);
    return name;
  }

  ValueId add(const std::string& op_type, std::vector<ValueId> inputs, Attributes attributes = {}) {
    ValueId out = graph_.add_value({.name = fresh_name("loss/" + op_type + "_out")});
    NodeId node = graph_.add_node({.name = fresh_name("loss/" + op_type),
                                   .op_type = op_type,
                                   .opset = kLossOpset,
                                   .inputs = std::move(inputs),
                                   .outputs = {out},
                                   .attributes = std::move(attributes)});
    const OpSchema* schema = OpRegistry::builtin().find("", op_type);
    ONNXTRAIN_CHECK(schema, "attach_loss uses " + op_type + ", which has no schema");
    infer_node(graph_, node, *schema);
    return out;
  }

  // A Constant node holding int64 `values` (a shape for Reshape).
  ValueId constant_ints(const std::vector<int64_t>& values) {
    Tensor t(DType::Int64, {static_cast<int64_t>(values.size())});
    std::copy(values.begin(), values.end(), t.data<int64_t>().begin());
    return add("Constant", {}, {{"value", t}});
  }

  // A Constant node holding a scalar of `dtype` (float32 or float64).
  ValueId constant_scalar(DType dtype, double value) {
    Tensor t(dtype, {});
    if (dtype == DType::Float64)
      t.data<double>()[0] = value;
    else
      t.data<float>()[0] = static_cast<float>(value);
    return add("Constant", {}, {{"value", t}});
  }

  ValueId add_labels(DType dtype, Shape shape) {
    ValueId labels = graph_.add_value(
        {.name = fresh_name("labels"), .dtype = dtype, .shape = std::move(shape), .role = ValueRole::Input});
    graph_.inputs.push_back(labels);
    return labels;
  }

 private:
  Graph& graph_;
  std::set<std::string> taken_;
};

std::string shape_of(const Value& v) { return std::string(dtype_name(v.dtype)) + " " + v.shape.to_string(); }

ValueId find_logits(const Graph& graph, const LossSpec& spec) {
  std::string listed;
  for (ValueId v : graph.outputs) listed += (listed.empty() ? "" : ", ") + graph.value(v).name;
  if (spec.attach_to.empty()) {
    if (graph.outputs.empty()) throw Error("the model has no outputs to attach a loss to");
    return graph.outputs.front();
  }
  std::optional<ValueId> v = graph.find_value(spec.attach_to);
  if (!v)
    throw Error("no value named '" + spec.attach_to + "' to attach the loss to; the model's outputs are " + listed);
  return *v;
}

// The scalar that training minimises: ReduceMean or ReduceSum over every element.
ValueId reduce_all(LossNodes& nodes, ValueId per_element, LossReduction reduction) {
  const char* op = reduction == LossReduction::Mean ? "ReduceMean" : "ReduceSum";
  return nodes.add(op, {per_element}, {{"keepdims", int64_t{0}}});
}

// Label smoothing on top of the cross-entropy `nll` (reduced as spec says) of `logits` (classes on axis 1)
// against `labels`: (1 − ε)·nll + ε·smooth, where smooth is −mean over the classes of log_softmax, zero at
// the labels ignored, reduced as the NLL is (mean: divided by the labels not ignored), as PyTorch does.
ValueId smoothed(LossNodes& nodes, Graph& graph, const LossSpec& spec, ValueId nll, ValueId logits, ValueId labels) {
  const double epsilon = spec.label_smoothing;
  if (!(epsilon > 0 && epsilon <= 1)) throw Error("label smoothing must be in (0, 1], got " + std::to_string(epsilon));
  const DType dtype = graph.value(logits).dtype;
  if (dtype != DType::Float32 && dtype != DType::Float64)
    throw Error("label smoothing needs float32 or float64 logits, not " + std::string(dtype_name(dtype)));
  const int64_t onnx_float_code = dtype == DType::Float64 ? 11 : 1;  // TensorProto.DOUBLE, FLOAT
  const ValueId log_p = nodes.add("LogSoftmax", {logits}, {{"axis", int64_t{1}}});
  const ValueId per_label = nodes.add(
      "Neg", {nodes.add("ReduceMean", {log_p}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}})});
  Tensor ignore(graph.value(labels).dtype, {});
  if (ignore.dtype() == DType::Int32)
    ignore.data<int32_t>()[0] = static_cast<int32_t>(spec.ignore_index);
  else
    ignore.data<int64_t>()[0] = spec.ignore_index;
  const ValueId ignored = nodes.add("Equal", {labels, nodes.add("Constant", {}, {{"value", ignore}})});
  const ValueId kept = nodes.add("Cast", {nodes.add("Not", {ignored})}, {{"to", onnx_float_code}});
  ValueId smooth = nodes.add("Mul", {per_label, kept});
  if (spec.reduction != LossReduction::None) smooth = reduce_all(nodes, smooth, LossReduction::Sum);
  if (spec.reduction == LossReduction::Mean)
    smooth = nodes.add("Div", {smooth, reduce_all(nodes, kept, LossReduction::Sum)});
  return nodes.add("Add", {nodes.add("Mul", {nll, nodes.constant_scalar(dtype, 1 - epsilon)}),
                           nodes.add("Mul", {smooth, nodes.constant_scalar(dtype, epsilon)})});
}

ValueId cross_entropy(LossNodes& nodes, Graph& graph, const LossSpec& spec, ValueId logits, ValueId& labels) {
  const Value& x = graph.value(logits);
  if (!x.shape.rank_known || x.shape.rank() < 2) {
    throw Error("cross-entropy needs logits (N,C) or (N,C,d1,...); '" + x.name + "' is " + shape_of(x));
  }
  if (spec.label_dtype != DType::Int64 && spec.label_dtype != DType::Int32) {
    throw Error("cross-entropy labels must be int64 or int32, not " + std::string(dtype_name(spec.label_dtype)));
  }
  Shape label_shape = x.shape;
  const bool classes_last = spec.classes_last && x.shape.rank() >= 3;
  const Dim classes = x.shape.dims.back();
  const std::string described = "'" + x.name + "' is " + shape_of(x);  // `x` dangles once values are added
  label_shape.dims.erase(classes_last ? label_shape.dims.end() - 1 : label_shape.dims.begin() + 1);
  labels = nodes.add_labels(spec.label_dtype, label_shape);
  const Attributes attributes{{"reduction", loss_reduction_name(spec.reduction)}, {"ignore_index", spec.ignore_index}};
  if (!classes_last) {
    const ValueId loss = nodes.add("SoftmaxCrossEntropyLoss", {logits, labels}, attributes);
    return spec.label_smoothing > 0 ? smoothed(nodes, graph, spec, loss, logits, labels) : loss;
  }
  // (N, d1..dk, C) logits as (N·d1···dk, C) rows and the labels as one vector: reshapes are views, where
  // moving the classes to axis 1 would transpose the largest tensor of a language model (its logits
  // over the whole vocabulary) both ways every step. The mean over the labels not ignored is the same.
  if (!classes.is_static()) throw Error("cross-entropy over the last axis needs a static class count; " + described);
  const ValueId rows = nodes.add("Reshape", {logits, nodes.constant_ints({-1, classes.value()})});
  const ValueId flat_labels = nodes.add("Reshape", {labels, nodes.constant_ints({-1})});
  ValueId loss = nodes.add("SoftmaxCrossEntropyLoss", {rows, flat_labels}, attributes);
  if (spec.label_smoothing > 0) loss = smoothed(nodes, graph, spec, loss, rows, flat_labels);
  if (spec.reduction != LossReduction::None) return loss;
  return nodes.add("Reshape", {loss, nodes.add("Shape", {labels})});  // per position, shaped like the labels
}

// The unreduced losses of mse, l1 and bce-with-logits, with float targets shaped like the logits.
ValueId elementwise_loss(LossNodes& nodes, Graph& graph, const LossSpec& spec, ValueId logits, ValueId& labels) {
  const Value& x = graph.value(logits);
  labels = nodes.add_labels(x.dtype, x.shape);
  switch (spec.kind) {
    case LossKind::MeanSquaredError: {
      ValueId diff = nodes.add("Sub", {logits, labels});
      return nodes.add("Mul", {diff, diff});
    }
    case LossKind::L1:
      return nodes.add("Abs", {nodes.add("Sub", {logits, labels})});
    case LossKind::BinaryCrossEntropyWithLogits: {  // Relu(x) − x·t + Softplus(−|x|)
      ValueId linear = nodes.add("Sub", {nodes.add("Relu", {logits}), nodes.add("Mul", {logits, labels})});
      ValueId log_term = nodes.add("Softplus", {nodes.add("Neg", {nodes.add("Abs", {logits})})});
      return nodes.add("Add", {linear, log_term});
    }
    default:
      ONNXTRAIN_CHECK(false, "elementwise_loss of kind " + loss_kind_name(spec.kind));
  }
  return {};
}

AttachedLoss use_model_output(Graph& graph, const LossSpec& spec) {
  std::optional<ValueId> v = graph.find_value(spec.model_output);
  if (!v) {
    std::string listed;
    for (ValueId o : graph.outputs) listed += (listed.empty() ? "" : ", ") + graph.value(o).name;
    throw Error("loss output:" + spec.model_output + ": the model has no value of that name; its outputs are " +
                listed);
  }
  const Value& loss = graph.value(*v);
  const std::optional<int64_t> numel = loss.shape.rank_known ? loss.shape.numel() : std::nullopt;
  if (!is_floating(loss.dtype) || numel != 1) {
    throw Error("loss output:" + spec.model_output + " must be a float scalar, but it is " + shape_of(loss));
  }
  if (std::find(graph.outputs.begin(), graph.outputs.end(), *v) == graph.outputs.end()) graph.outputs.push_back(*v);
  return {.loss = loss.name, .loss_value = *v};
}

}  // namespace

AttachedLoss attach_loss(Graph& graph, const LossSpec& spec) {
  if (spec.kind == LossKind::ModelOutput) return use_model_output(graph, spec);
  const ValueId logits = find_logits(graph, spec);
  const Value& x = graph.value(logits);
  if (!is_floating(x.dtype)) {
    throw Error("the " + loss_kind_name(spec.kind) + " loss needs float logits, but '" + x.name + "' is " +
                shape_of(x));
  }
  LossNodes nodes(graph);
  AttachedLoss result{.logits = x.name, .logits_value = logits};
  ValueId labels;
  ValueId loss;
  ValueId per_element;
  if (spec.kind == LossKind::SoftmaxCrossEntropy) {
    loss = cross_entropy(nodes, graph, spec, logits, labels);
    if (spec.reduction == LossReduction::None) per_element = loss;
  } else {
    per_element = elementwise_loss(nodes, graph, spec, logits, labels);
    if (spec.reduction != LossReduction::None) loss = reduce_all(nodes, per_element, spec.reduction);
  }
  if (spec.reduction == LossReduction::None) {
    loss = reduce_all(nodes, per_element, LossReduction::Sum);
    graph.value(per_element).name = nodes.fresh_name("loss_per_element");
    graph.outputs.push_back(per_element);
    result.per_element = graph.value(per_element).name;
  }
  graph.value(loss).name = nodes.fresh_name("loss");
  graph.outputs.push_back(loss);
  result.loss = graph.value(loss).name;
  result.labels = graph.value(labels).name;
  result.loss_value = loss;
  result.labels_value = labels;
  return result;
}

}  // namespace onnxtrain
