#include "partitioner/cost_model.h"

#include <algorithm>
#include <limits>
#include <set>

#include "graph/error.h"
#include "graph/op_schema.h"

namespace onnxtrain {

namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();

// Ops whose float32 kernels GPU libraries run on tensor cores in TF32 mode (DeviceDescription::use_tf32).
bool tensor_core_op(const Node& node) {
  return node.op_type.find("Conv") != std::string::npos || node.op_type.find("MatMul") != std::string::npos ||
         node.op_type == "Gemm";
}

// The dtype a kernel computes in: its first present input's (the output's for source ops like Constant).
DType compute_dtype(const Graph& g, const Node& node) {
  for (ValueId in : node.inputs)
    if (in.valid()) return g.value(in).dtype;
  for (ValueId out : node.outputs)
    if (out.valid()) return g.value(out).dtype;
  return DType::Float32;
}

// Which forward values get a gradient, by the sweeps build_training_graph makes: forward from the
// differentiated values through differentiable (float Data/Weight) inputs, backward from the loss.
std::vector<bool> values_with_gradient(const TrainingGraph& training) {
  const Graph& g = training.graph;
  const std::vector<NodeId>& order = g.order();
  const size_t n = training.forward_node_count;
  auto differentiable = [&](const Node& node, size_t i) {
    if (!node.has_input(i) || !is_floating(g.value(node.inputs[i]).dtype)) return false;
    const OpSchema* schema = OpRegistry::builtin().find(node.domain, node.op_type);
    if (!schema) return false;
    const InputKind kind = schema->input_kind(i);
    return kind == InputKind::Data || kind == InputKind::Weight;
  };
  std::vector<bool> requires_grad(g.value_count(), false), reached(g.value_count(), false);
  for (const TrainingGraph::Gradient& gr : training.gradients) requires_grad[gr.value.index] = true;
  std::vector<bool> active(n, false);
  for (size_t k = 0; k < n; ++k) {
    const Node& node = g.node(order[k]);
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (differentiable(node, i) && requires_grad[node.inputs[i].index]) active[k] = true;
    if (!active[k]) continue;
    for (ValueId out : node.outputs)
      if (out.valid() && is_floating(g.value(out).dtype)) requires_grad[out.index] = true;
  }
  if (training.loss.valid()) reached[training.loss.index] = true;
  for (size_t k = n; k-- > 0;) {
    const Node& node = g.node(order[k]);
    if (!active[k]) continue;
    bool has_grad = false;
    for (ValueId out : node.outputs) has_grad = has_grad || (out.valid() && reached[out.index]);
    if (!has_grad) continue;
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (differentiable(node, i) && requires_grad[node.inputs[i].index]) reached[node.inputs[i].index] = true;
  }
  std::vector<bool> result(g.value_count(), false);
  for (size_t v = 0; v < result.size(); ++v) result[v] = requires_grad[v] && reached[v];
  return result;
}

}  // namespace

std::vector<size_t> owning_forward_node(const TrainingGraph& training) {
  const Graph& g = training.graph;
  const std::vector<NodeId>& order = g.order();
  const size_t forward = training.forward_node_count;
  ONNXTRAIN_CHECK(forward <= order.size(), "forward_node_count exceeds the training graph's nodes");
  uint32_t slots = 0;
  for (NodeId n : order) slots = std::max(slots, n.index + 1);
  std::vector<size_t> position(slots, kNone);  // node index -> place in the order
  for (size_t i = 0; i < order.size(); ++i) position[order[i].index] = i;

  std::vector<size_t> owner(order.size(), kNone);
  for (size_t i = 0; i < forward; ++i) owner[i] = i;
  for (size_t i = forward; i < order.size(); ++i) {
    const NodeId id = order[i];
    const NodeId for_node = id.index < training.emitted_for.size() ? training.emitted_for[id.index] : NodeId{};
    if (for_node.valid() && for_node.index < slots && position[for_node.index] < forward) {
      owner[i] = position[for_node.index];
      continue;
    }
    // The loss seed (reads the loss) and the gradient sums of graph inputs (read backward values): the
    // earliest owner among the producers of what the node reads; nothing at all: the last forward node.
    size_t best = kNone;
    for (ValueId in : g.node(id).inputs) {
      if (!in.valid() || !g.value(in).producer.valid()) continue;
      const size_t p = position[g.value(in).producer.index];
      if (p != kNone && owner[p] != kNone) best = std::min(best, owner[p]);
    }
    owner[i] = best != kNone ? best : (forward > 0 ? forward - 1 : 0);
  }
  return owner;
}

std::vector<bool> lives_on_one_stage(const TrainingGraph& training) {
  const Graph& g = training.graph;
  std::vector<bool> one_stage(g.value_count(), false);
  for (const TrainingGraph::Gradient& gr : training.gradients)
    if (g.value(gr.value).data && g.value(gr.value).dtype == DType::Float32) one_stage[gr.value.index] = true;
  for (size_t v = 0; v < g.value_count(); ++v)
    if (g.value(ValueId{static_cast<uint32_t>(v)}).role == ValueRole::State) one_stage[v] = true;
  return one_stage;
}

namespace {

// Whether a MatMul reads `value` (or the CPU's FusedMatMul: graph/autodiff/fused_matmul.h), directly or
// through Dropout, Cast or Identity.
bool feeds_matmul(const Graph& g, ValueId value, int depth = 0) {
  for (NodeId user : g.consumers(value)) {
    const Node& node = g.node(user);
    if (node.op_type == "MatMul" || node.op_type == "FusedMatMul") return true;
    const bool passes = node.op_type == "Dropout" || node.op_type == "Cast" || node.op_type == "Identity";
    if (passes && depth < 3 && !node.outputs.empty() && feeds_matmul(g, node.outputs[0], depth + 1)) return true;
  }
  return false;
}

// The values that depend on a graph input (the data), in the graph's topological order.
std::vector<bool> values_from_graph_inputs(const Graph& g) {
  std::vector<bool> from_data(g.value_count(), false);
  for (ValueId v : g.inputs) from_data[v.index] = true;
  for (NodeId id : g.order()) {
    const Node& node = g.node(id);
    const bool reads_data = std::any_of(node.inputs.begin(), node.inputs.end(),
                                        [&](ValueId in) { return in.valid() && from_data[in.index]; });
    for (ValueId out : node.outputs)
      if (out.valid()) from_data[out.index] = reads_data;
  }
  return from_data;
}

// Attention: a Softmax whose output a MatMul reads (the scores times the values).
bool has_attention(const Graph& g) {
  for (NodeId id : g.order()) {
    const Node& node = g.node(id);
    if (node.op_type == "Softmax" && node.domain.empty() && !node.outputs.empty() && feeds_matmul(g, node.outputs[0]))
      return true;
  }
  return false;
}

}  // namespace

CostProfile build_cost_profile(const TrainingGraph& training, int64_t batch, const DeviceDescription& device,
                               CostModelReport* report) {
  if (batch <= 0) throw Error("the micro-batch size must be positive, got " + std::to_string(batch));
  if (device.fp32_flops <= 0 || device.memory_bandwidth <= 0) {
    throw Error("device '" + device.name + "' has no FLOP/s or memory bandwidth");
  }
  const Graph& g = training.graph;
  const std::vector<NodeId>& order = g.order();
  const size_t n = training.forward_node_count;
  if (n == 0) throw Error("the training graph has no forward nodes");
  const std::vector<size_t> owner = owning_forward_node(training);

  SymbolBindings bindings;
  for (const std::string& symbol : g.info.batch_symbols) bindings[symbol] = batch;
  std::set<std::string> unknown;
  auto bytes_of = [&](ValueId v) -> int64_t {
    const Value& value = g.value(v);
    if (value.data) return static_cast<int64_t>(value.data->nbytes());
    std::optional<int64_t> numel = value.shape.numel(bindings);
    if (!numel) {
      unknown.insert(value.name);
      return 0;
    }
    return *numel * static_cast<int64_t>(dtype_size(value.dtype));
  };

  CostProfile profile;
  profile.model = g.info.path;
  profile.device = device.name;
  profile.batch = batch;
  profile.memory_bandwidth = device.memory_bandwidth * device.memory_efficiency;
  profile.nodes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Node& node = g.node(order[i]);
    profile.nodes[i].name = node.name;
    profile.nodes[i].op_type = node.domain.empty() ? node.op_type : node.domain + "." + node.op_type;
  }

  std::vector<bool> is_graph_input(g.value_count(), false);
  for (ValueId v : g.inputs) is_graph_input[v.index] = true;
  std::vector<size_t> producer_position(g.value_count(), kNone);  // forward nodes only
  for (size_t i = 0; i < n; ++i)
    for (ValueId out : g.node(order[i]).outputs)
      if (out.valid()) producer_position[out.index] = i;

  // The tensors the pipelines keep on one stage, and the first and last forward node owning a reader of each.
  const std::vector<bool> placed_once = lives_on_one_stage(training);
  std::vector<size_t> first_owner(g.value_count(), kNone), last_owner(g.value_count(), kNone);

  std::vector<bool> initializer_counted(g.value_count(), false);
  std::vector<std::vector<size_t>> kept_by(g.value_count());  // every forward node whose backward reads it
  std::vector<size_t> last_reader(g.value_count(), kNone);    // last forward node using it, either pass
  const std::vector<bool> has_gradient = values_with_gradient(training);
  const std::vector<bool> from_data = values_from_graph_inputs(g);

  for (size_t i = 0; i < order.size(); ++i) {
    const NodeId id = order[i];
    const Node& node = g.node(id);
    const bool forward = i < n;
    NodeCost& cost = profile.nodes[owner[i]];

    double bytes = 0;
    for (ValueId in : node.inputs) {
      if (!in.valid()) continue;
      const Value& v = g.value(in);
      const int64_t b = bytes_of(in);
      bytes += static_cast<double>(b);
      if (v.data) {  // an initializer (or constant): memory of the stage that reads it first
        if (placed_once[in.index]) {
          first_owner[in.index] = std::min(first_owner[in.index], owner[i]);
          last_owner[in.index] = last_owner[in.index] == kNone ? owner[i] : std::max(last_owner[in.index], owner[i]);
        }
        if (!initializer_counted[in.index]) {
          initializer_counted[in.index] = true;
          (v.role == ValueRole::Parameter && !v.frozen ? cost.parameter_bytes : cost.state_bytes) += b;
        }
        continue;
      }
      const bool forward_value = producer_position[in.index] != kNone || is_graph_input[in.index];
      if (!forward_value) continue;
      size_t& last = last_reader[in.index];
      last = last == kNone ? owner[i] : std::max(last, owner[i]);
      // A graph input the backward reads (the data, the labels) is fed again from the loader's batch, which
      // holds it for every stage alike: not a stage's kept activation.
      if (!forward && !is_graph_input[in.index]) {
        kept_by[in.index].push_back(owner[i]);
      }
    }
    for (ValueId out : node.outputs)
      if (out.valid()) bytes += static_cast<double>(bytes_of(out));

    OpCost op_cost;
    if (const OpSchema* schema = OpRegistry::builtin().find(node.domain, node.op_type)) {
      op_cost = node_cost(g, id, *schema, bindings);
    }
    const double flops = op_cost.forward_flops;
    const double seconds = device.kernel_seconds(flops, bytes, compute_dtype(g, node), tensor_core_op(node)) +
                           op_cost.serial_steps * device.step_overhead_s;
    if (forward) {
      cost.forward_flops += flops;
      cost.forward_bytes += bytes;
      cost.forward_seconds += seconds;
    } else {
      cost.backward_flops += flops;
      cost.backward_bytes += bytes;
      cost.backward_seconds += seconds;
    }
  }

  // Kept activations, and the cuts each forward-pass value crosses (a difference array over cuts).
  std::vector<int64_t> activation_diff(n + 1, 0), gradient_diff(n + 1, 0), tensors_diff(n + 1, 0);
  for (size_t v = 0; v < g.value_count(); ++v) {
    const ValueId id{static_cast<uint32_t>(v)};
    // Kept at the first forward node whose backward reads it; listed again when several do.
    std::vector<size_t>& readers = kept_by[v];
    std::sort(readers.begin(), readers.end());
    readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
    if (!readers.empty()) profile.nodes[readers.front()].activation_bytes += bytes_of(id);
    if (readers.size() > 1) profile.shared_kept.push_back({bytes_of(id), std::move(readers)});
    const size_t p = producer_position[v];
    if (p == kNone || last_reader[v] == kNone || last_reader[v] <= p) continue;
    const int64_t b = bytes_of(id);
    activation_diff[p + 1] += b;
    activation_diff[last_reader[v] + 1] -= b;
    if (has_gradient[v]) {
      gradient_diff[p + 1] += b;
      gradient_diff[last_reader[v] + 1] -= b;
      // A tensor made from parameters only (a tied embedding's transpose) crosses cuts wherever the order
      // puts its producer; it says nothing about where the blocks are.
      if (from_data[v]) ++tensors_diff[p + 1], --tensors_diff[last_reader[v] + 1];
    }
  }
  profile.cut_splits_tied.assign(n + 1, "");
  for (size_t v = 0; v < g.value_count(); ++v) {
    if (first_owner[v] == kNone || last_owner[v] <= first_owner[v]) continue;
    for (size_t c = first_owner[v] + 1; c <= last_owner[v]; ++c)
      if (profile.cut_splits_tied[c].empty())
        profile.cut_splits_tied[c] = g.value(ValueId{static_cast<uint32_t>(v)}).name;
  }
  profile.cut_activation_bytes.assign(n + 1, 0);
  profile.cut_gradient_bytes.assign(n + 1, 0);
  profile.cut_gradient_tensors.assign(n + 1, 0);
  profile.has_attention = has_attention(g);
  int64_t activation = 0, gradient = 0, tensors = 0;
  for (size_t i = 1; i < n; ++i) {
    activation += activation_diff[i];
    gradient += gradient_diff[i];
    tensors += tensors_diff[i];
    profile.cut_activation_bytes[i] = activation;
    profile.cut_gradient_bytes[i] = gradient;
    profile.cut_gradient_tensors[i] = static_cast<int>(tensors);
  }
  if (report) report->unknown_sizes.assign(unknown.begin(), unknown.end());
  return profile;
}

StageCost sum_stage(const CostProfile& profile, size_t begin, size_t end) {
  ONNXTRAIN_CHECK(begin <= end && end <= profile.nodes.size(), "stage range outside the profile");
  StageCost s;
  for (size_t i = begin; i < end; ++i) {
    const NodeCost& c = profile.nodes[i];
    s.forward_flops += c.forward_flops;
    s.backward_flops += c.backward_flops;
    s.forward_bytes += c.forward_bytes;
    s.backward_bytes += c.backward_bytes;
    s.forward_seconds += c.forward_seconds;
    s.backward_seconds += c.backward_seconds;
    s.parameter_bytes += c.parameter_bytes;
    s.state_bytes += c.state_bytes;
    s.activation_bytes += c.activation_bytes;
  }
  auto cut = [](const std::vector<int64_t>& cuts, size_t i) { return i < cuts.size() ? cuts[i] : 0; };
  s.activation_bytes_in = cut(profile.cut_activation_bytes, begin);
  s.activation_bytes_out = cut(profile.cut_activation_bytes, end);
  s.gradient_bytes_in = cut(profile.cut_gradient_bytes, end);
  s.gradient_bytes_out = cut(profile.cut_gradient_bytes, begin);
  return s;
}

}  // namespace onnxtrain
