// The gradient of a tensor that is split by Gathers of constant scalar indices, one per slice of an axis
// (torch's MultiheadAttention exports its q, k and v as x[0], x[1], x[2] of the stacked projections):
// each Gather's rule contributes GatherGrad(dy_k) (zeros the size of x, slice k written), and the three
// contributions would be summed. Together they are the slices side by side: Concat of the dy_k (each
// unsqueezed on the axis the scalar index removed), one write of x's size instead of three zeroed
// copies and their sum (a ViT layer's 6.4 MB of stacked q, k and v: 2.5% of its step in GatherGrad and
// as much again in the Sum, `perf` of `onnxtrain train` at one thread).
#include <algorithm>
#include <optional>

#include "graph/autodiff/training_graph_builder.h"
#include "graph/op_schema.h"

namespace onnxtrain {
namespace {

struct Slice {
  int64_t index = 0;    // along the axis
  ValueId dy;           // the Gather's output gradient
  bool scalar = false;  // the index was a scalar: dy lacks the axis
  NodeId gather_grad;
};

// The slice a contribution writes, when it is a GatherGrad of a constant single index along `axis`.
std::optional<Slice> slice_of(const Graph& g, ValueId part, int64_t rank, int64_t& axis) {
  const NodeId producer = g.value(part).producer;
  if (!producer.valid()) return std::nullopt;
  const Node& node = g.node(producer);
  if (node.op_type != "GatherGrad" || node.domain != kTrainingDomain || node.inputs.size() != 3) return std::nullopt;
  const Value& indices = g.value(node.inputs[2]);
  if (!indices.data || indices.data->numel() != 1 || indices.data->rank() > 1 || is_floating(indices.data->dtype()))
    return std::nullopt;
  const std::optional<int64_t> node_axis = normalize_axis(node.attr_int("axis", 0), rank);
  if (!node_axis || (axis >= 0 && *node_axis != axis)) return std::nullopt;
  axis = *node_axis;
  return Slice{.index = indices.data->to_int64()[0],
               .dy = node.inputs[0],
               .scalar = indices.data->rank() == 0,
               .gather_grad = producer};
}

}  // namespace

ValueId TrainingGraphBuilder::concat_of_gathered_slices(NodeId owner, ValueId v, const std::vector<ValueId>& parts) {
  Graph& g = graph();
  const Value& x = g.value(v);
  if (!x.shape.rank_known || !is_floating(x.dtype)) return {};
  const auto rank = static_cast<int64_t>(x.shape.rank());
  int64_t axis = -1;
  std::vector<Slice> slices;
  for (ValueId part : parts) {
    std::optional<Slice> s = slice_of(g, part, rank, axis);
    if (!s) return {};
    slices.push_back(*s);
  }
  const Dim& size = x.shape.dims[static_cast<size_t>(axis)];
  if (!size.is_static() || size.value() != static_cast<int64_t>(slices.size())) return {};
  for (Slice& s : slices)
    if (s.index < 0) s.index += size.value();
  std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) { return a.index < b.index; });
  for (size_t k = 0; k < slices.size(); ++k)
    if (slices[k].index != static_cast<int64_t>(k)) return {};  // not each slice once

  std::vector<ValueId> pieces;
  for (const Slice& s : slices) {
    ValueId piece = s.dy;
    if (s.scalar)
      piece = emit(owner, "Unsqueeze", "", {s.dy, add_constant(Tensor::vector_int64({axis}), "axes")}, {}, {true})[0];
    pieces.push_back(piece);
    g.remove_node(s.gather_grad);  // its output was this sum's alone
  }
  return emit(owner, "Concat", "", pieces, {{"axis", axis}}, {true})[0];
}

}  // namespace onnxtrain
