// The Conv nodes whose weight training may hold in a form of its own (live_conv_taps.h: only the live
// taps; tap_major_conv_weights.h: tap-major): one group, a float32 Parameter W (not frozen) read by this
// node alone, X and Y of W's rank with X's channels and the spatial sizes of both static, explicit pads
// or VALID.
//
//   if (std::optional<TrainableConv> c = trainable_conv(graph, node)) ... c->output ...
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "graph/graph.h"

namespace onnxtrain {

struct TrainableConv {
  const Value* weight = nullptr;         // W (M, C, k...), with its data
  std::vector<int64_t> input, output;    // X's and Y's spatial sizes
  std::vector<int64_t> pads, dilations;  // pads begin then end per axis (VALID: zeros)
};

std::optional<TrainableConv> trainable_conv(const Graph& graph, NodeId id);

}  // namespace onnxtrain
