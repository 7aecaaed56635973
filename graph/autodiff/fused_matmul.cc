// MatMul trained as FusedMatMul, with the Transposes and constant scalings before it and the scaling and
// bias Add after it folded in (fused_matmul.h).
#include "graph/autodiff/fused_matmul.h"

#include <numeric>
#include <optional>

#include "graph/fused_activation.h"
#include "graph/op_schema.h"
#include "graph/ops/op_helpers.h"

namespace onnxtrain {
namespace {

bool is_float32_matrix_or_batch(const Value& v) {
  return v.dtype == DType::Float32 && v.shape.rank_known && v.shape.rank() >= 2;
}

// Node `id`, when it is a Transpose that swaps the last two axes of a float32 tensor of rank 2 or more.
std::optional<NodeId> last_axes_swap(const Graph& g, NodeId id) {
  if (!id.valid()) return std::nullopt;
  const Node& n = g.node(id);
  if (!n.is_onnx_op("Transpose") || n.inputs.size() != 1 || !is_float32_matrix_or_batch(g.value(n.inputs[0])))
    return std::nullopt;
  const int64_t rank = g.value(n.inputs[0]).shape.rank();
  std::vector<int64_t> swap(static_cast<size_t>(rank));
  std::iota(swap.begin(), swap.end(), int64_t{0});
  std::swap(swap[rank - 1], swap[rank - 2]);
  return op_helpers::transpose_perm(n, rank) == swap ? std::optional(id) : std::nullopt;
}

// The Transpose that makes `v` and that only `reader` reads, when it swaps the last two axes. Not one of a
// weight that other nodes read too: a tied embedding's (Gather reads it, the output layer its transpose)
// stays, so that a pipeline split can keep the weight in the embedding's stage and send the transpose on.
std::optional<NodeId> swap_read_only_by(const Graph& g, ValueId v, NodeId reader) {
  const std::optional<NodeId> only = g.sole_reader(v);
  if (!only || *only != reader) return std::nullopt;
  const std::optional<NodeId> swap = last_axes_swap(g, g.value(v).producer);
  if (!swap) return std::nullopt;
  const ValueId source = g.node(*swap).inputs[0];
  if (g.value(source).data && g.consumers(source).size() > 1) return std::nullopt;
  return swap;
}

// Removes the Transpose `swap`: its reader `reader` reads the Transpose's input in its place.
void bypass(Graph& g, NodeId swap, NodeId reader, ValueId swapped) {
  const ValueId source = g.node(swap).inputs[0];
  for (ValueId& in : g.node(reader).inputs)
    if (in == swapped) in = source;
  g.remove_node(swap);
}

// The positions d of the inputs that Mul or Div node `n` scales by its other input, a one-element tensor of
// static shape: x·s and s·x (0 and 1), x/s (0 only: s/x is no scaling). Empty for any other node.
std::vector<size_t> scaled_inputs(const Graph& g, const Node& n) {
  const bool div = n.is_onnx_op("Div");
  if ((!n.is_onnx_op("Mul") && !div) || n.inputs.size() != 2) return {};
  std::vector<size_t> scaled;
  for (size_t d : {size_t{0}, size_t{1}}) {
    if (d == 1 && div) break;
    const Shape& s = g.value(n.inputs[1 - d]).shape;
    if (s.rank_known && s.is_static() && s.numel() == 1) scaled.push_back(d);
  }
  return scaled;
}

// Folds a transposing operand `i` of FusedMatMul `id` into its flag: a Transpose that feeds it directly,
// or one that feeds a Mul or Div by a scalar that feeds it (the scaling then applies before the swap).
bool fold_transpose(Graph& g, NodeId id, size_t i) {
  const ValueId operand = g.node(id).inputs[i];
  if (const std::optional<NodeId> swap = swap_read_only_by(g, operand, id)) {
    bypass(g, *swap, id, operand);
    return true;
  }
  const NodeId scale_id = g.value(operand).producer;
  if (!scale_id.valid() || g.sole_reader(operand) != std::optional(id)) return false;
  const Node& scale = g.node(scale_id);
  for (size_t d : scaled_inputs(g, scale)) {
    if (g.value(scale.inputs[1 - d]).shape.rank() > g.value(operand).shape.rank()) continue;
    const std::optional<NodeId> swap = swap_read_only_by(g, scale.inputs[d], scale_id);
    if (!swap) continue;
    bypass(g, *swap, scale_id, scale.inputs[d]);
    infer_node(g, scale_id, *OpRegistry::builtin().find("", g.node(scale_id).op_type));
    return true;
  }
  return false;
}

// The input a Mul or Div node `id` scales and the factor: x for x·s, s·x or x/s (factor s, s, 1/s), with
// s a float32 constant of one element whose rank is at most x's, so that the result has x's shape.
std::optional<std::pair<ValueId, double>> constant_scaling(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (n.outputs.size() != 1) return std::nullopt;
  const bool div = n.is_onnx_op("Div");
  for (size_t d : scaled_inputs(g, n)) {
    const Value& x = g.value(n.inputs[d]);
    const Value& s = g.value(n.inputs[1 - d]);
    if (s.role != ValueRole::Constant || !s.data || s.dtype != DType::Float32 || !x.shape.rank_known ||
        s.shape.rank() > x.shape.rank())
      continue;
    const double factor = s.data->to_double()[0];
    if (div && factor == 0.0) continue;  // x / 0 is ±inf or NaN, not a factor
    return std::pair{n.inputs[d], div ? 1.0 / factor : factor};
  }
  return std::nullopt;
}

// Folds a constant scaling that alone feeds operand `i` of FusedMatMul `id` into `alpha`: the product
// reads the scaling's input instead.
bool fold_operand_scaling(Graph& g, NodeId id, size_t i, double& alpha) {
  const ValueId operand = g.node(id).inputs[i];
  const NodeId scale_id = g.value(operand).producer;
  if (!scale_id.valid() || g.sole_reader(operand) != std::optional(id)) return false;
  const auto scaling = constant_scaling(g, scale_id);
  if (!scaling || scaling->first == g.node(id).inputs[1 - i]) return false;  // not (x·s)·x: one operand twice
  g.node(id).inputs[i] = scaling->first;
  g.remove_node(scale_id);
  alpha *= scaling->second;
  return true;
}

// Folds the constant scaling that alone reads FusedMatMul `id`'s product into `alpha` (attention scores
// divided by √d after Q·Kᵀ, as BERT's and GPT-2's exports have them).
bool fold_product_scaling(Graph& g, NodeId id, double& alpha) {
  const ValueId product = g.node(id).outputs[0];
  const std::optional<NodeId> reader = g.sole_reader(product);
  if (!reader) return false;
  const auto scaling = constant_scaling(g, *reader);
  if (!scaling || scaling->first != product) return false;
  const ValueId scaled = g.node(*reader).outputs[0];
  g.remove_node(*reader);
  g.node(id).outputs[0] = scaled;
  g.value(scaled).producer = id;
  alpha *= scaling->second;
  return true;
}

// Folds the Add of a (N) bias that alone reads FusedMatMul `id`'s product into it as C. Not an Add that
// add_relu.h fused with its Relu: FusedMatMul has no activation, and the Relu would be lost (an outside
// check found a Linear and ReLU over 3-D inputs trained as the Linear alone).
bool fold_bias(Graph& g, NodeId id) {
  const ValueId product = g.node(id).outputs[0];
  const std::optional<NodeId> reader = g.sole_reader(product);
  if (!reader) return false;
  const Node& add = g.node(*reader);
  if (!add.is_onnx_op("Add") || add.inputs.size() != 2 || add.inputs[0] == add.inputs[1] || add.outputs.size() != 1 ||
      add.attributes.contains(kFusedActivation))
    return false;
  const ValueId bias = add.inputs[0] == product ? add.inputs[1] : add.inputs[0];
  const Shape& b = g.value(bias).shape;
  const Dim n = g.value(product).shape.dims.back();
  if (g.value(bias).dtype != DType::Float32 || !b.rank_known || b.rank() != 1 || !b.dims[0].is_static() ||
      !n.is_static() || b.dims[0].value() != n.value())
    return false;
  const ValueId sum = add.outputs[0];
  g.remove_node(*reader);
  Node& fused = g.node(id);
  fused.inputs.push_back(bias);
  fused.outputs[0] = sum;
  g.value(sum).producer = id;
  return true;
}

}  // namespace

int fuse_matmul(Graph& graph) {
  const OpSchema& schema = *OpRegistry::builtin().find(kTrainingDomain, "FusedMatMul");
  int fused = 0;
  for (NodeId id : std::vector<NodeId>(graph.order())) {
    const Node& n = graph.node(id);
    if (!n.is_onnx_op("MatMul") || n.inputs.size() != 2 || n.inputs[0] == n.inputs[1] || n.outputs.size() != 1 ||
        !is_float32_matrix_or_batch(graph.value(n.inputs[0])) || !is_float32_matrix_or_batch(graph.value(n.inputs[1])))
      continue;
    Node& node = graph.node(id);
    node.op_type = "FusedMatMul";
    node.domain = kTrainingDomain;
    node.opset = 1;
    const bool trans_a = fold_transpose(graph, id, 0), trans_b = fold_transpose(graph, id, 1);
    graph.node(id).attributes["transA"] = int64_t{trans_a};
    graph.node(id).attributes["transB"] = int64_t{trans_b};
    // Scalings first: alpha·(A'·B') + C is the op, so a bias Add folds in after them (the Add reads the
    // scaled product), never a scaling after the bias.
    double alpha = 1.0;
    fold_operand_scaling(graph, id, 0, alpha);
    fold_operand_scaling(graph, id, 1, alpha);
    fold_product_scaling(graph, id, alpha);
    if (alpha != 1.0) graph.node(id).attributes["alpha"] = alpha;
    fold_bias(graph, id);
    infer_node(graph, id, schema);
    ++fused;
  }
  if (fused > 0) graph.sort();
  return fused;
}

}  // namespace onnxtrain
