// Slices gathered before the Transpose they were gathered after (gather_before_transpose.h).
#include "graph/autodiff/gather_before_transpose.h"

#include <algorithm>
#include <optional>

#include "graph/op_schema.h"
#include "graph/ops/op_helpers.h"

namespace onnxtrain {
namespace {

constexpr int kSqueezeAxesInputSince = 13;

// The axes Squeeze node `s` removes from its input of rank `rank`, in order; nullopt when not known.
std::optional<std::vector<int64_t>> squeezed_axes(const Graph& g, const Node& s, const Shape& in) {
  std::vector<int64_t> axes;
  if (s.opset >= kSqueezeAxesInputSince && s.has_input(1)) {
    const Value& given = g.value(s.inputs[1]);
    if (!given.data) return std::nullopt;
    axes = given.data->to_int64();
  } else if (s.opset < kSqueezeAxesInputSince && s.has_attribute("axes")) {
    axes = s.attr_ints("axes");
  } else {
    for (size_t k = 0; k < in.dims.size(); ++k)
      if (in.dims[k].is_static() && in.dims[k].value() == 1) axes.push_back(static_cast<int64_t>(k));
  }
  for (int64_t& a : axes) {
    const std::optional<int64_t> normalized = normalize_axis(a, static_cast<int64_t>(in.rank()));
    if (!normalized) return std::nullopt;
    a = *normalized;
  }
  std::ranges::sort(axes);
  return axes;
}

// A Gather to move: the node and the input axis its slice is taken along.
struct Move {
  NodeId gather;
  int64_t source_axis;
};

// Gather `id` of `sliced` (the Transpose's output, less its `squeezed` axes) as a Move, when its index
// is a constant scalar and the slice keeps the other axes in the Transpose input's order.
std::optional<Move> movable(const Graph& g, NodeId id, ValueId sliced, const std::vector<int64_t>& perm,
                            const std::vector<int64_t>& kept) {
  const Node& n = g.node(id);
  if (!n.is_onnx_op("Gather") || n.inputs.size() != 2 || n.inputs[0] != sliced || n.inputs[1] == sliced)
    return std::nullopt;
  const Value& index = g.value(n.inputs[1]);
  if (!index.data || index.data->rank() != 0 || !is_integer(index.dtype)) return std::nullopt;
  const std::optional<int64_t> axis = normalize_axis(n.attr_int("axis", 0), static_cast<int64_t>(kept.size()));
  if (!axis) return std::nullopt;
  std::vector<int64_t> order;  // input axes of the slice's axes
  for (int64_t k : kept)
    if (k != kept[static_cast<size_t>(*axis)]) order.push_back(perm[static_cast<size_t>(k)]);
  if (!std::ranges::is_sorted(order)) return std::nullopt;
  return Move{id, perm[static_cast<size_t>(kept[static_cast<size_t>(*axis)])]};
}

// Gather `move.gather` reads `source` along its axis; the size-1 `dropped` input axes that the Transpose's
// Squeeze removed go by a Squeeze after it (opset `opset`), which writes the Gather's old output.
void gather_from(Graph& g, const Move& move, ValueId source, std::vector<int64_t> dropped, int opset) {
  const OpSchema& gather_schema = *OpRegistry::builtin().find("", "Gather");
  Node& gather = g.node(move.gather);
  gather.inputs[0] = source;
  gather.attributes["axis"] = move.source_axis;
  if (dropped.empty()) return infer_node(g, move.gather, gather_schema);
  for (int64_t& a : dropped) a -= a > move.source_axis;  // the Gather removed source_axis
  const ValueId out = gather.outputs[0];
  const std::string name = g.value(out).name;  // copied: add_value moves the graph's values
  const ValueId slice = g.add_value({.name = g.unused_value_name(name + "_slice"), .dtype = g.value(out).dtype});
  g.node(move.gather).outputs[0] = slice;
  g.value(slice).producer = move.gather;
  g.value(out).producer = NodeId{};
  infer_node(g, move.gather, gather_schema);
  Node squeeze{.name = g.node(move.gather).name + "_squeeze", .op_type = "Squeeze", .opset = opset, .inputs = {slice}};
  if (opset >= kSqueezeAxesInputSince) {
    const auto count = static_cast<int64_t>(dropped.size());
    squeeze.inputs.push_back(g.add_value({.name = g.unused_value_name(name + "_axes"),
                                          .dtype = DType::Int64,
                                          .shape = Shape::of({count}),
                                          .role = ValueRole::Buffer,
                                          .data = Tensor::vector_int64(dropped)}));
    g.initializers.push_back(squeeze.inputs.back());
  } else {
    squeeze.attributes["axes"] = dropped;
  }
  squeeze.outputs = {out};
  const NodeId s = g.add_node(std::move(squeeze));
  infer_node(g, s, *OpRegistry::builtin().find("", "Squeeze"));
}

bool is_graph_output(const Graph& g, ValueId v) { return std::ranges::find(g.outputs, v) != g.outputs.end(); }

// Rewrites Transpose `id` when every slice read from it can move; true when it did (the Transpose is gone).
bool rewrite(Graph& g, NodeId id) {
  const Node& t = g.node(id);
  if (!t.is_onnx_op("Transpose") || t.inputs.size() != 1 || t.outputs.size() != 1) return false;
  const ValueId source = t.inputs[0], transposed = t.outputs[0];
  const Shape& in = g.value(source).shape;
  if (!in.rank_known || !g.value(transposed).shape.rank_known || is_graph_output(g, transposed)) return false;
  const std::vector<int64_t> perm = op_helpers::transpose_perm(t, static_cast<int64_t>(in.rank()));

  ValueId sliced = transposed;  // what the Gathers read
  std::vector<int64_t> squeezed;
  std::optional<NodeId> squeeze;
  const std::vector<NodeId> readers = g.consumers(transposed);
  if (readers.size() == 1 && g.node(readers[0]).is_onnx_op("Squeeze") && g.node(readers[0]).inputs[0] == transposed &&
      g.node(readers[0]).outputs.size() == 1) {
    const std::optional<std::vector<int64_t>> axes = squeezed_axes(g, g.node(readers[0]), g.value(transposed).shape);
    if (!axes || is_graph_output(g, g.node(readers[0]).outputs[0])) return false;
    squeeze = readers[0];
    squeezed = *axes;
    sliced = g.node(readers[0]).outputs[0];
  }
  std::vector<int64_t> kept;
  for (int64_t k = 0; k < static_cast<int64_t>(perm.size()); ++k)
    if (!std::ranges::binary_search(squeezed, k)) kept.push_back(k);

  std::vector<Move> moves;
  for (NodeId reader : g.consumers(sliced)) {
    const std::optional<Move> m = movable(g, reader, sliced, perm, kept);
    if (!m) return false;
    moves.push_back(*m);
  }
  if (moves.empty()) return false;
  std::vector<int64_t> dropped;  // input axes of the squeezed ones
  for (int64_t q : squeezed) dropped.push_back(perm[static_cast<size_t>(q)]);
  std::ranges::sort(dropped);
  const int opset = squeeze ? g.node(*squeeze).opset : 0;
  for (const Move& m : moves) gather_from(g, m, source, dropped, opset);
  if (squeeze) g.remove_node(*squeeze);
  g.remove_node(id);
  return true;
}

}  // namespace

int gather_before_transpose(Graph& graph) {
  int removed = 0;
  for (NodeId id : std::vector<NodeId>(graph.order())) removed += rewrite(graph, id);
  if (removed > 0) graph.sort_depth_first();
  return removed;
}

}  // namespace onnxtrain
