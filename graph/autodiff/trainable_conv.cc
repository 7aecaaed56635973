#include "graph/autodiff/trainable_conv.h"

#include <string>

namespace onnxtrain {

std::optional<TrainableConv> trainable_conv(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (!n.is_onnx_op("Conv") || n.attr_int("group", 1) != 1 || !n.has_input(1) || n.outputs.size() != 1) return {};
  const Value& w = g.value(n.inputs[1]);
  if (w.role != ValueRole::Parameter || w.frozen || !w.data || w.dtype != DType::Float32) return {};
  if (g.consumers(n.inputs[1]).size() != 1) return {};
  const Shape& x = g.value(n.inputs[0]).shape;
  const Shape& y = g.value(n.outputs[0]).shape;
  const std::vector<int64_t>& k = w.data->sizes();
  const size_t rank = k.size();
  if (rank < 3 || !x.rank_known || !y.rank_known || x.rank() != static_cast<int64_t>(rank) ||
      y.rank() != static_cast<int64_t>(rank))
    return {};
  for (size_t d = 1; d < rank; ++d)
    if (!x.dims[d].is_static() || (d >= 2 && !y.dims[d].is_static())) return {};
  if (x.dims[1].value() != k[1]) return {};
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return {};
  const size_t spatial = rank - 2;
  TrainableConv c{.weight = &w,
                  .pads = auto_pad == "VALID" ? std::vector<int64_t>(2 * spatial, 0)
                                              : n.attr_ints("pads", std::vector<int64_t>(2 * spatial, 0)),
                  .dilations = n.attr_ints("dilations", std::vector<int64_t>(spatial, 1))};
  if (c.pads.size() != 2 * spatial || c.dilations.size() != spatial) return {};
  for (size_t d = 2; d < rank; ++d) {
    c.input.push_back(x.dims[d].value());
    c.output.push_back(y.dims[d].value());
  }
  return c;
}

}  // namespace onnxtrain
