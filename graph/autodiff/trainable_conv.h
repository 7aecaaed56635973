// What the forms training may hold a convolution's weight in share (live_conv_taps.h: only the live
// taps; tap_major_conv_weights.h: tap-major): which Conv nodes qualify (one group, a float32 Parameter W,
// not frozen, read by this node alone, X and Y of W's rank with X's channels and the spatial sizes of both
// static, explicit pads or VALID), W's replacement in the graph, and a checkpoint's optimizer state moved
// to the new parameter.
//
//   if (std::optional<TrainableConv> c = trainable_conv(graph, node)) ... c->output ...
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace onnxtrain {

struct TrainableConv {
  const Value* weight = nullptr;         // W (M, C, k...), with its data
  std::vector<int64_t> input, output;    // X's and Y's spatial sizes
  std::vector<int64_t> pads, dilations;  // pads begin then end per axis (VALID: zeros)
  std::vector<int64_t> strides;
};

std::optional<TrainableConv> trainable_conv(const Graph& graph, NodeId id);

// W's initializer replaced by `value` as the Parameter `name`; returns it. W's data leaves this graph only
// (a copy of the model's graph shares W's buffer).
ValueId replace_conv_weight(Graph& graph, ValueId weight, const std::string& name, Tensor value);

// A checkpoint's optimizer state of parameter `from` ("<from>/NAME") renamed to `to`; each float32 entry
// of `elements` elements (a weight-sized state) passed through `convert`, the others (step counts) as
// they are.
void move_weight_state(std::map<std::string, Tensor>& optimizer_state, const std::string& from, const std::string& to,
                       int64_t elements, const std::function<Tensor(const Tensor&)>& convert);

}  // namespace onnxtrain
