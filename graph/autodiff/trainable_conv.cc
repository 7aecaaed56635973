#include "graph/autodiff/trainable_conv.h"

#include <algorithm>
#include <string>
#include <utility>

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
                  .dilations = n.attr_ints("dilations", std::vector<int64_t>(spatial, 1)),
                  .strides = n.attr_ints("strides", std::vector<int64_t>(spatial, 1))};
  if (c.pads.size() != 2 * spatial || c.dilations.size() != spatial || c.strides.size() != spatial) return {};
  for (size_t d = 2; d < rank; ++d) {
    c.input.push_back(x.dims[d].value());
    c.output.push_back(y.dims[d].value());
  }
  return c;
}

ValueId replace_conv_weight(Graph& g, ValueId weight, const std::string& name, Tensor value) {
  g.value(weight).data.reset();
  std::erase(g.initializers, weight);
  const Shape shape = Shape::of(value.sizes());
  const ValueId id = g.add_value(
      {.name = name, .dtype = DType::Float32, .shape = shape, .role = ValueRole::Parameter, .data = std::move(value)});
  g.initializers.push_back(id);
  return id;
}

void move_weight_state(std::map<std::string, Tensor>& optimizer_state, const std::string& from, const std::string& to,
                       int64_t elements, const std::function<Tensor(const Tensor&)>& convert) {
  const std::string prefix = from + "/";
  for (auto it = optimizer_state.lower_bound(prefix); it != optimizer_state.end() && it->first.starts_with(prefix);) {
    const Tensor& t = it->second;
    const bool weight_sized = t.dtype() == DType::Float32 && t.numel() == elements;
    optimizer_state[to + "/" + it->first.substr(prefix.size())] = weight_sized ? convert(t) : t;
    it = optimizer_state.erase(it);
  }
}

}  // namespace onnxtrain
