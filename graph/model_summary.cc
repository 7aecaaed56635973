#include "graph/model_summary.h"

#include <algorithm>
#include <limits>
#include <set>

#include "graph/op_schema.h"

namespace onnxtrain {

static std::string op_label(const Node& node) {
  return node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
}

namespace {

// total + count * size, held at INT64_MAX instead of wrapping (a batch of 2^31 of a large model); counts
// beyond int64 are unknown (Shape::numel gives none) and add 0.
int64_t add_saturating(int64_t total, int64_t count, int64_t size) {
  int64_t product = 0, sum = 0;
  if (__builtin_mul_overflow(count, size, &product) || __builtin_add_overflow(total, product, &sum))
    return std::numeric_limits<int64_t>::max();
  return sum;
}

}  // namespace

ModelSummary summarize_model(const Graph& graph, int64_t batch) {
  ModelSummary s;
  s.info = graph.info;
  s.batch = batch;
  for (const std::string& symbol : graph.info.batch_symbols) s.bindings[symbol] = batch;
  const SymbolBindings& bindings = s.bindings;

  for (ValueId id : graph.inputs)
    s.inputs.push_back({graph.value(id).name, graph.value(id).dtype, graph.value(id).shape});
  for (ValueId id : graph.outputs)
    s.outputs.push_back({graph.value(id).name, graph.value(id).dtype, graph.value(id).shape});

  for (ValueId id : graph.initializers) {
    const Value& v = graph.value(id);
    int64_t n = v.data ? v.data->numel() : 0;
    switch (v.role) {
      case ValueRole::Parameter:
        s.parameters += n;
        s.parameter_bytes += static_cast<int64_t>(v.data->nbytes());
        (v.frozen ? s.frozen_parameters : s.trainable_parameters) += n;
        break;
      case ValueRole::State:
        s.state_elements += n;
        break;
      case ValueRole::Buffer:
        s.buffer_elements += n;
        break;
      default:
        s.constant_elements += n;
        break;
    }
  }

  std::set<ValueId> counted;
  std::set<std::string> untrainable;
  for (NodeId id : graph.order()) {
    const Node& node = graph.node(id);
    NodeSummary n{.name = node.name, .op_type = node.op_type, .domain = node.domain};
    ++s.op_histogram[op_label(node)];
    if (!node.outputs.empty() && node.outputs[0].valid()) n.output_shape = graph.value(node.outputs[0]).shape;
    for (ValueId in : node.inputs) {
      if (in.valid() && graph.value(in).role == ValueRole::Parameter && counted.insert(in).second) {
        n.parameters += graph.value(in).data->numel();
      }
    }
    for (ValueId out : node.outputs) {
      if (!out.valid()) continue;
      const Value& v = graph.value(out);
      n.activation_bytes = add_saturating(n.activation_bytes, v.shape.numel(bindings).value_or(0), dtype_size(v.dtype));
    }
    const OpSchema* schema = OpRegistry::builtin().find(node.domain, node.op_type);
    n.supported = schema != nullptr;
    n.typed = std::ranges::none_of(
        node.outputs, [&](ValueId out) { return out.valid() && graph.value(out).dtype == DType::Undefined; });
    if (!schema) untrainable.insert(op_label(node));
    if (schema && n.typed) {
      OpCost cost = node_cost(graph, id, *schema, bindings);
      n.forward_flops = cost.forward_flops;
      n.backward_flops = cost.backward_flops;
    }
    s.forward_flops += n.forward_flops;
    s.backward_flops += n.backward_flops;
    s.activation_bytes = add_saturating(s.activation_bytes, n.activation_bytes, 1);
    s.nodes.push_back(std::move(n));
  }
  s.untrainable_ops.assign(untrainable.begin(), untrainable.end());
  return s;
}

}  // namespace onnxtrain
