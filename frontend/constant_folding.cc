#include <onnx/defs/schema.h>

#include <algorithm>
#include <set>

#include "frontend/einsum_lowering.h"
#include "frontend/import_passes.h"
#include "graph/error.h"
#include "graph/op_schema.h"

namespace onnxtrain {

namespace {

bool is_constant(const Graph& graph, ValueId id) {
  if (!id.valid()) return true;  // an omitted optional input does not block folding
  const Value& v = graph.value(id);
  return v.data && (v.role == ValueRole::Constant || v.role == ValueRole::Buffer);
}

void make_constant(Graph& graph, ValueId id, Tensor data) {
  Value& v = graph.value(id);
  v.dtype = data.dtype();
  v.shape = Shape::of(data.sizes());
  v.data = std::move(data);
  v.role = ValueRole::Constant;
  graph.initializers.push_back(id);
}

// Folding declines an output larger than this: the node then stays and runs at training time like any
// other node. A hostile Range or ConstantOfShape (2^40 elements) would otherwise allocate at import.
constexpr int64_t kMaxFoldedBytes = int64_t{64} << 20;

bool too_big_to_fold(const Value& output) {
  if (!output.shape.is_static()) return false;  // inference found no size: the evaluator's own checks apply
  std::optional<int64_t> count = output.shape.numel();
  int64_t bytes = 0;
  return !count || __builtin_mul_overflow(*count, static_cast<int64_t>(dtype_size(output.dtype)), &bytes) ||
         bytes > kMaxFoldedBytes;
}

// Evaluates the node with the schema's constant evaluator; false when it cannot be folded.
bool fold_with_evaluator(Graph& graph, NodeId id, const OpSchema& schema) {
  const Node& node = graph.node(id);
  if (!schema.fold) return false;
  for (ValueId out : node.outputs)
    if (out.valid() && too_big_to_fold(graph.value(out))) return false;
  auto type_only = [&](size_t i) {
    return std::find(schema.type_only_inputs.begin(), schema.type_only_inputs.end(), i) !=
           schema.type_only_inputs.end();
  };
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (!type_only(i) && !is_constant(graph, node.inputs[i])) return false;
  FoldContext ctx{node, {}, {}};
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    ValueId in = node.inputs[i];
    if (!in.valid())
      ctx.inputs.emplace_back();
    else if (type_only(i))
      ctx.inputs.emplace_back(graph.value(in).dtype, std::vector<int64_t>{0});
    else
      ctx.inputs.push_back(*graph.value(in).data);
  }
  for (ValueId out : node.outputs) ctx.output_shapes.push_back(out.valid() ? graph.value(out).shape : Shape());
  std::vector<Tensor> results = schema.fold(ctx);
  if (results.empty()) return false;  // the evaluator declined (e.g. float16 math)
  ONNXTRAIN_CHECK(results.size() >= node.outputs.size(),
                  node.op_type + " fold returned " + std::to_string(results.size()) + " outputs");
  std::vector<ValueId> outputs = node.outputs;
  graph.remove_node(id);
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].valid()) make_constant(graph, outputs[i], std::move(results[i]));
  return true;
}

// Folds int outputs whose element values shape inference found statically (Shape of a static tensor,
// and the Gather/Concat/... chains over it), even when the node's inputs are not constants.
bool fold_known_values(Graph& graph, NodeId id) {
  const Node& node = graph.node(id);
  for (ValueId out : node.outputs) {
    if (!out.valid()) continue;
    const Value& v = graph.value(out);
    bool int_type = v.dtype == DType::Int64 || v.dtype == DType::Int32;
    if (!v.known || !int_type || !v.shape.rank_known || v.shape.rank() > 1) return false;
    for (const Dim& d : *v.known)
      if (!d.is_static()) return false;
  }
  std::vector<ValueId> outputs = node.outputs;
  graph.remove_node(id);
  for (ValueId out : outputs) {
    if (!out.valid()) continue;
    const Value& v = graph.value(out);
    std::vector<int64_t> values;
    for (const Dim& d : *v.known) values.push_back(d.value());
    Tensor t = Tensor::vector_int64(values);
    if (v.shape.rank() == 0) t = t.reshaped({});
    if (v.dtype == DType::Int32) {
      Tensor narrowed(DType::Int32, t.sizes());
      std::transform(values.begin(), values.end(), narrowed.data<int32_t>().begin(),
                     [](int64_t x) { return static_cast<int32_t>(x); });
      t = narrowed;
    }
    make_constant(graph, out, t);
  }
  return true;
}

bool is_graph_output(const Graph& graph, ValueId id) {
  return std::find(graph.outputs.begin(), graph.outputs.end(), id) != graph.outputs.end();
}

void remove_dead_nodes(Graph& graph) {
  for (bool changed = true; changed;) {
    changed = false;
    std::set<ValueId> used(graph.outputs.begin(), graph.outputs.end());
    for (NodeId n : graph.order())
      for (ValueId in : graph.node(n).inputs) used.insert(in);
    for (NodeId n : std::vector<NodeId>(graph.order())) {
      const auto& outs = graph.node(n).outputs;
      if (std::none_of(outs.begin(), outs.end(), [&](ValueId v) { return v.valid() && used.count(v); })) {
        graph.remove_node(n);
        changed = true;
      }
    }
    std::vector<ValueId> kept;
    for (ValueId id : graph.initializers)
      if (used.count(id)) kept.push_back(id);
    graph.initializers = std::move(kept);
  }
}

}  // namespace

namespace {

// Types the outputs of `node`, an op without an onnxtrain schema, from ONNX's inference.
void type_from_onnx(Graph& graph, const Node& node, const OnnxValueInfos& onnx_infos) {
  if (!onnx::OpSchemaRegistry::Schema(node.op_type, node.opset, node.domain)) {
    const bool onnx_domain = node.domain.empty() || node.domain == "ai.onnx";
    // Beyond the opsets Debian's ONNX library knows, an op it lacks may well be ONNX's (Mish at 18).
    const std::string why = !onnx_domain ? "unknown op '" + node.op_type + "' in domain '" + node.domain +
                                               "' (custom domains need a model-local function or an onnxtrain schema)"
                            : node.opset > kOnnxLibraryMaxOpset
                                ? "unknown op '" + node.op_type + "': onnxtrain has no implementation of it, and " +
                                      "its ONNX library (opsets up to " + std::to_string(kOnnxLibraryMaxOpset) +
                                      ") does not know it either: it may be an op of ONNX " + std::to_string(node.opset)
                                : "unknown op '" + node.op_type + "': neither onnxtrain nor ONNX " +
                                      std::to_string(node.opset) + " defines it";
    throw Error(why).at_node(node.name, node.op_type, node.domain, node.opset);
  }
  for (ValueId out : node.outputs) {
    if (!out.valid()) continue;
    auto it = onnx_infos.find(graph.value(out).name);
    if (it != onnx_infos.end()) {
      graph.value(out).dtype = it->second.dtype;
      graph.value(out).shape = it->second.shape;
    } else if (std::ranges::any_of(graph.consumers(out), [&](NodeId reader) {
                 const Node& r = graph.node(reader);
                 return OpRegistry::builtin().find(r.domain, r.op_type) != nullptr;
               })) {
      // Else that reader would be blamed ("input 0 has no known type"): a GRU's Transpose. (A reader
      // without a schema takes ONNX's types too: SplitToSequence's sequence into SequenceAt.)
      throw Error("onnxtrain has no implementation of " + node.op_type +
                  " yet (it can neither train nor run it), and ONNX's shape inference gives no type for its "
                  "output '" +
                  graph.value(out).name + "', so the nodes after it cannot be imported")
          .at_node(node.name, node.op_type, node.domain, node.opset);
    }
  }
}

bool reads_an_untyped_value(const Graph& graph, const Node& node) {
  return std::ranges::any_of(node.inputs,
                             [&](ValueId in) { return in.valid() && graph.value(in).dtype == DType::Undefined; });
}

}  // namespace

void infer_and_fold(Graph& graph, const OnnxValueInfos& onnx_infos, ImportedModel& report, bool keep_untypable) {
  int einsums = 0;
  for (NodeId id : std::vector<NodeId>(graph.order())) {
    Node& node = graph.node(id);
    const OpSchema* schema = OpRegistry::builtin().find(node.domain, node.op_type);
    if (keep_untypable && reads_an_untyped_value(graph, node)) {
      ++report.untyped_after;
      continue;
    }
    try {
      if (node.is_onnx_op("Einsum")) {  // its ops are added after the others: sorted below
        lower_einsum(graph, id);
        ++einsums;
        continue;
      }
      if (!schema) {
        type_from_onnx(graph, node, onnx_infos);
        continue;
      }
      infer_node(graph, id, *schema);
    } catch (const Error& e) {
      if (!keep_untypable) throw;
      const Node& failed = graph.node(id);  // `node` may dangle: a lowering adds nodes before it refuses
      report.untyped_nodes.push_back("node '" + failed.name + "' (" + failed.op_type + "): " + e.message());
      for (ValueId out : failed.outputs) {
        if (!out.valid()) continue;
        graph.value(out).dtype = DType::Undefined;
        graph.value(out).shape = Shape::unknown_rank();
      }
      continue;
    }
    if (node.op_type == "Identity" && node.domain.empty() && node.has_input(0) &&
        !is_graph_output(graph, node.outputs[0])) {
      ValueId in = node.inputs[0], out = node.outputs[0];
      graph.remove_node(id);
      graph.replace_uses(out, in);
      ++report.folded_nodes;
      continue;
    }
    if (fold_with_evaluator(graph, id, *schema) || fold_known_values(graph, id)) ++report.folded_nodes;
  }
  if (einsums > 0) {
    graph.sort_depth_first();
    report.notes.push_back("lowered " + std::to_string(einsums) + " Einsum node" + (einsums > 1 ? "s" : "") +
                           " into Transpose, Reshape, ReduceSum and MatMul nodes (the written model keeps them)");
  }
  remove_dead_nodes(graph);
  // Those still in the graph: an op whose outputs nothing reads left with the dead nodes.
  std::set<std::string> remaining;
  for (NodeId id : graph.order()) {
    const Node& node = graph.node(id);
    if (OpRegistry::builtin().find(node.domain, node.op_type)) continue;
    remaining.insert(node.domain.empty() ? node.op_type : node.domain + "." + node.op_type);
    if (report.first_unsupported_node.empty()) report.first_unsupported_node = node.name;
  }
  report.unsupported_ops.assign(remaining.begin(), remaining.end());
}

}  // namespace onnxtrain
