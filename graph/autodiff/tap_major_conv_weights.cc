#include "graph/autodiff/tap_major_conv_weights.h"

#include <cstring>

#include "graph/autodiff/trainable_conv.h"
#include "graph/error.h"
#include "graph/op_schema.h"

namespace onnxtrain {
namespace {

struct Found {
  NodeId node;
  TapMajorConvWeight weight;
};

// The taps of a weight of sizes w (M, C, k...): k1·..·kn.
int64_t taps_of(const std::vector<int64_t>& w) {
  int64_t taps = 1;
  for (size_t d = 2; d < w.size(); ++d) taps *= w[d];
  return taps;
}

std::optional<TapMajorConvWeight> candidate(const Graph& g, NodeId id) {
  const std::optional<TrainableConv> c = trainable_conv(g, id);
  if (!c) return {};
  const std::vector<int64_t>& w = c->weight->data->sizes();
  std::vector<ConvAxis> axes;
  for (size_t a = 0; a < c->input.size(); ++a) {
    axes.push_back({.input = c->input[a],
                    .output = c->output[a],
                    .kernel = w[a + 2],
                    .stride = c->strides[a],
                    .pad_begin = c->pads[a],
                    .dilation = c->dilations[a]});
  }
  if (!tap_product_takes(axes)) return {};
  return TapMajorConvWeight{.weight = c->weight->name, .tap_major = c->weight->name + ".tap_major"};
}

std::vector<Found> find_all(const Graph& g) {
  std::vector<Found> found;
  for (NodeId id : g.order())
    if (std::optional<TapMajorConvWeight> w = candidate(g, id)) found.push_back({id, std::move(*w)});
  return found;
}

// `t`, float32 elements of a W of sizes `w` (in the model's layout, or tap-major), in the other layout.
Tensor permuted(const Tensor& t, const std::vector<int64_t>& w, bool to_tap_major, const std::string& what) {
  int64_t elements = 1;
  for (int64_t s : w) elements *= s;
  if (t.dtype() != DType::Float32 || t.numel() != elements || w.size() < 3)
    throw Error(what + " is not " + std::to_string(elements) + " float32 elements of a convolution weight");
  Tensor out(DType::Float32, to_tap_major ? tap_major_sizes(w) : w);
  permute_conv_weight(t.raw(), out.raw(), sizeof(float), w[0], w[1], taps_of(w), to_tap_major);
  return out;
}

void rewrite(Graph& g, const Found& found) {
  const ValueId w_id = g.node(found.node).inputs[1];
  Tensor wt = to_tap_major(*g.value(w_id).data);
  const size_t spatial = wt.sizes().size() - 2;
  const ValueId wt_id = replace_conv_weight(g, w_id, found.weight.tap_major, std::move(wt));
  Node& node = g.node(found.node);
  node.inputs[1] = wt_id;
  node.op_type = "TapMajorConv";
  node.domain = kTrainingDomain;
  node.opset = 1;
  if (node.attr_string("auto_pad", "NOTSET") == "VALID") {  // explicit, as the gradient rule passes them on
    node.attributes.erase("auto_pad");
    node.attributes["pads"] = std::vector<int64_t>(2 * spatial, 0);
  }
}

}  // namespace

bool tap_product_takes(const std::vector<ConvAxis>& axes) {
  constexpr int64_t kAlwaysUpTo = 4, kMostPositions = 16;
  int64_t positions = 1, taps = 1;
  for (const ConvAxis& a : axes) {
    if (a.output < 1 || a.output > kMostPositions / positions) return false;
    positions *= a.output;
    taps *= a.kernel;
  }
  if (taps == 1 || positions < 2) return false;
  if (positions <= kAlwaysUpTo) return true;
  int64_t live_pairs = 1;  // the (tap, output position) pairs inside the input: products of each axis's
  for (const ConvAxis& a : axes) {
    int64_t live = 0;
    for (int64_t out = 0; out < a.output; ++out)
      for (int64_t k = 0; k < a.kernel; ++k) {
        const int64_t at = out * a.stride - a.pad_begin + k * a.dilation;
        live += at >= 0 && at < a.input;
      }
    live_pairs *= live;
  }
  return 4 * live_pairs <= 3 * positions * taps;
}

void permute_conv_weight(const void* from, void* to, size_t element_bytes, int64_t m, int64_t c, int64_t t,
                         bool to_tap_major) {
  const auto* source = static_cast<const std::byte*>(from);
  auto* target = static_cast<std::byte*>(to);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < c; ++j)
      for (int64_t k = 0; k < t; ++k) {
        const auto model = static_cast<size_t>((i * c + j) * t + k), tap = static_cast<size_t>((k * c + j) * m + i);
        const size_t read = to_tap_major ? model : tap, write = to_tap_major ? tap : model;
        std::memcpy(target + write * element_bytes, source + read * element_bytes, element_bytes);
      }
}

Tensor to_tap_major(const Tensor& w) { return permuted(w, w.sizes(), true, "the weight"); }

Tensor from_tap_major(const Tensor& wt) {
  if (wt.sizes().size() < 3)
    throw Error("the tap-major weight has rank " + std::to_string(wt.sizes().size()) + "; expected 3 or more");
  return permuted(wt, model_layout_sizes(wt.sizes()), false, "the tap-major weight");
}

std::vector<int64_t> tap_major_sizes(const std::vector<int64_t>& w) {
  if (w.size() < 3) return {};
  std::vector<int64_t> sizes(w.begin() + 2, w.end());
  sizes.push_back(w[1]);
  sizes.push_back(w[0]);
  return sizes;
}

std::vector<int64_t> model_layout_sizes(const std::vector<int64_t>& wt) {
  if (wt.size() < 3) return {};
  std::vector<int64_t> sizes{wt[wt.size() - 1], wt[wt.size() - 2]};
  sizes.insert(sizes.end(), wt.begin(), wt.end() - 2);
  return sizes;
}

std::vector<TapMajorConvWeight> tap_major_conv_weights(const Graph& graph) {
  std::vector<TapMajorConvWeight> weights;
  for (Found& f : find_all(graph)) weights.push_back(std::move(f.weight));
  return weights;
}

std::vector<TapMajorConvWeight> train_tap_major_conv_weights(Graph& graph) {
  std::vector<TapMajorConvWeight> done;
  for (const Found& f : find_all(graph)) {
    if (graph.find_value(f.weight.tap_major))
      throw Error("tap-major conv weights: the model already has a value named '" + f.weight.tap_major + "'");
    rewrite(graph, f);
    done.push_back(f.weight);
  }
  return done;
}

std::map<std::string, Tensor> with_model_layout_conv_weights(const Graph& model,
                                                             std::map<std::string, Tensor> trained) {
  std::map<std::string, Tensor> no_optimizer_state;
  match_tap_major_conv_weights(model, false, trained, no_optimizer_state);
  return trained;
}

int match_tap_major_conv_weights(const Graph& model, bool tap_major, std::map<std::string, Tensor>& tensors,
                                 std::map<std::string, Tensor>& optimizer_state) {
  int converted = 0;
  for (const TapMajorConvWeight& w : tap_major_conv_weights(model)) {
    const std::string& from = tap_major ? w.weight : w.tap_major;
    const std::string& to = tap_major ? w.tap_major : w.weight;
    auto held = tensors.find(from);
    if (held == tensors.end() || tensors.count(to)) continue;
    const Tensor& model_w = *model.value(*model.find_value(w.weight)).data;
    tensors[to] = permuted(held->second, model_w.sizes(), tap_major, "'" + from + "'");
    tensors.erase(held);
    move_weight_state(optimizer_state, from, to, model_w.numel(), [&](const Tensor& t) {
      return permuted(t, model_w.sizes(), tap_major, "the optimizer state of '" + from + "'");
    });
    ++converted;
  }
  return converted;
}

}  // namespace onnxtrain
