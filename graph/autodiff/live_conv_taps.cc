#include "graph/autodiff/live_conv_taps.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <span>
#include <utility>

#include "graph/autodiff/tap_major_conv_weights.h"
#include "graph/autodiff/trainable_conv.h"
#include "graph/error.h"
#include "graph/op_schema.h"

namespace onnxtrain {
namespace {

struct Found {
  NodeId node;
  LiveConvTaps taps;
};

// The live taps of one spatial dimension for the single output position: the taps t whose input position
// t·dilation − pad_begin lies inside the input. Empty unless they are consecutive and read input positions
// 0, 1, ..., in − 1 in order (then Flatten(X) lines up with the taps).
std::optional<std::pair<int64_t, int64_t>> live_range(int64_t kernel, int64_t in, int64_t pad_begin, int64_t dilation) {
  std::vector<int64_t> taps;
  for (int64_t t = 0; t < kernel; ++t) {
    const int64_t position = t * dilation - pad_begin;
    if (position >= 0 && position < in) {
      if (position != static_cast<int64_t>(taps.size())) return std::nullopt;  // consecutive positions: taps too
      taps.push_back(t);
    }
  }
  if (static_cast<int64_t>(taps.size()) != in) return std::nullopt;
  return std::make_pair(taps.front(), taps.back() + 1);
}

std::optional<LiveConvTaps> taps_of(const Graph& g, NodeId id) {
  const std::optional<TrainableConv> c = trainable_conv(g, id);
  if (!c) return {};
  for (int64_t o : c->output)
    if (o != 1) return {};
  const std::vector<int64_t>& k = c->weight->data->sizes();
  LiveConvTaps taps{.weight = c->weight->name, .live = c->weight->name + ".live_taps"};
  int64_t box = 1, kernel = 1;
  for (size_t d = 0; d < c->input.size(); ++d) {
    const auto range = live_range(k[d + 2], c->input[d], c->pads[d], c->dilations[d]);
    if (!range) return {};
    taps.begin.push_back(range->first);
    taps.end.push_back(range->second);
    box *= range->second - range->first;
    kernel *= k[d + 2];
  }
  if (box == kernel) return {};  // every tap is live: nothing to save
  return taps;
}

std::vector<Found> find_all(const Graph& g) {
  std::vector<Found> found;
  for (NodeId id : g.order())
    if (std::optional<LiveConvTaps> taps = taps_of(g, id)) found.push_back({id, std::move(*taps)});
  return found;
}

// Calls visit(full index, live index) for every element of the live box of W (sizes `w`), in live order.
void for_each_live_element(const std::vector<int64_t>& w, const LiveConvTaps& taps,
                           const std::function<void(int64_t, int64_t)>& visit) {
  const size_t spatial = w.size() - 2;
  int64_t kernel = 1, box = 1;
  for (size_t d = 0; d < spatial; ++d) {
    kernel *= w[d + 2];
    box *= taps.end[d] - taps.begin[d];
  }
  std::vector<int64_t> offsets;  // the box's taps as offsets into one (m, c) kernel, in row-major box order
  for (int64_t j = 0; j < box; ++j) {
    int64_t rest = j, offset = 0, stride = kernel;
    for (size_t d = 0; d < spatial; ++d) {
      stride /= w[d + 2];
      int64_t inner = 1;
      for (size_t e = d + 1; e < spatial; ++e) inner *= taps.end[e] - taps.begin[e];
      offset += (taps.begin[d] + rest / inner) * stride;
      rest %= inner;
    }
    offsets.push_back(offset);
  }
  for (int64_t mc = 0; mc < w[0] * w[1]; ++mc)
    for (int64_t j = 0; j < box; ++j) visit(mc * kernel + offsets[static_cast<size_t>(j)], mc * box + j);
}

// The live taps of `full`, float32 elements of a weight of sizes w, as an (M, C·box) tensor.
Tensor live_box(const Tensor& full, const std::vector<int64_t>& w, const LiveConvTaps& taps) {
  Tensor live(DType::Float32, {w[0], taps.columns(w)});
  const std::span<const float> from = full.data<float>();
  const std::span<float> to = live.data<float>();
  for_each_live_element(w, taps,
                        [&](int64_t f, int64_t l) { to[static_cast<size_t>(l)] = from[static_cast<size_t>(f)]; });
  return live;
}

NodeId add_inferred(Graph& g, Node node) {
  const OpSchema* schema = OpRegistry::builtin().find("", node.op_type);
  ONNXTRAIN_CHECK(schema != nullptr, "live conv taps: no schema for " + node.op_type);
  const NodeId id = g.add_node(std::move(node));
  infer_node(g, id, *schema);
  return id;
}

void rewrite(Graph& g, const Found& found) {
  const Node conv = g.node(found.node);
  const ValueId w_id = conv.inputs[1];
  const Value& w = g.value(w_id);
  Tensor live = live_box(*w.data, w.data->sizes(), found.taps);
  const int64_t m = live.sizes()[0];
  const ValueId live_id = replace_conv_weight(g, w_id, found.taps.live, std::move(live));

  const ValueId y = conv.outputs[0];
  const int64_t rank = g.value(y).shape.rank();
  std::vector<int64_t> target(static_cast<size_t>(rank), 1);
  target[0] = 0;  // Reshape's 0: the batch dimension as it is
  target[1] = m;
  Tensor shape(DType::Int64, {rank});
  std::copy(target.begin(), target.end(), shape.data<int64_t>().begin());
  std::vector<Dim> known;
  for (int64_t v : target) known.push_back(Dim(v));
  const std::string base = conv.name.empty() ? g.value(y).name : conv.name;
  const ValueId shape_id = g.add_value({.name = g.unused_value_name(base + "/live_taps/shape"),
                                        .dtype = DType::Int64,
                                        .shape = Shape::of({rank}),
                                        .role = ValueRole::Buffer,
                                        .data = shape,
                                        .known = known});
  g.initializers.push_back(shape_id);

  auto it = g.info.opsets.find("");
  const int opset = std::max(it == g.info.opsets.end() ? 17 : it->second, 13);
  g.remove_node(found.node);
  const ValueId flat = g.add_value({.name = g.unused_value_name(base + "/live_taps/flat")});
  // The first node keeps the Conv's name: a pipeline plan that starts a stage at the Conv still holds.
  add_inferred(g, {.name = conv.name,
                   .op_type = "Flatten",
                   .opset = opset,
                   .inputs = {conv.inputs[0]},
                   .outputs = {flat},
                   .attributes = Attributes{{"axis", int64_t{1}}}});
  const ValueId product = g.add_value({.name = g.unused_value_name(base + "/live_taps/product")});
  std::vector<ValueId> gemm_inputs{flat, live_id};
  if (conv.has_input(2)) gemm_inputs.push_back(conv.inputs[2]);
  add_inferred(g, {.name = base + "/live_taps/Gemm",
                   .op_type = "Gemm",
                   .opset = opset,
                   .inputs = gemm_inputs,
                   .outputs = {product},
                   .attributes = Attributes{{"transB", int64_t{1}}}});
  add_inferred(g, {.name = base + "/live_taps/Reshape",
                   .op_type = "Reshape",
                   .opset = opset,
                   .inputs = {product, shape_id},
                   .outputs = {y}});
}

}  // namespace

std::vector<LiveConvTaps> live_conv_taps(const Graph& graph) {
  std::vector<LiveConvTaps> taps;
  for (Found& f : find_all(graph)) taps.push_back(std::move(f.taps));
  return taps;
}

std::vector<LiveConvTaps> train_live_conv_taps_only(Graph& graph) {
  std::vector<LiveConvTaps> done;
  for (const Found& f : find_all(graph)) {
    if (graph.find_value(f.taps.live))
      throw Error("live conv taps: the model already has a value named '" + f.taps.live + "'");
    rewrite(graph, f);
    done.push_back(f.taps);
  }
  if (!done.empty()) graph.sort_depth_first();
  return done;
}

namespace {

// `trained` with the live taps put into tensors of W's size: W's own values (weights) or zeros (gradients)
// elsewhere.
std::map<std::string, Tensor> with_full_conv_tensors(const Graph& model, std::map<std::string, Tensor> trained,
                                                     bool zeros_elsewhere) {
  trained = with_model_layout_conv_weights(model, std::move(trained));
  for (const LiveConvTaps& taps : live_conv_taps(model)) {
    auto it = trained.find(taps.live);
    if (it == trained.end()) continue;
    const Value& w = model.value(*model.find_value(taps.weight));
    Tensor full = w.data->clone();
    if (zeros_elsewhere) std::fill(full.data<float>().begin(), full.data<float>().end(), 0.0f);
    const Tensor& live = it->second;
    const int64_t expected = taps.elements(full.sizes());
    if (live.dtype() != DType::Float32 || live.numel() != expected)
      throw Error("'" + taps.live + "' is not the " + std::to_string(expected) + " float32 live taps of '" +
                  taps.weight + "'");
    const std::span<const float> from = live.data<float>();
    const std::span<float> to = full.data<float>();
    for_each_live_element(full.sizes(), taps,
                          [&](int64_t f, int64_t l) { to[static_cast<size_t>(f)] = from[static_cast<size_t>(l)]; });
    trained.erase(it);
    trained[taps.weight] = std::move(full);
  }
  return trained;
}

}  // namespace

std::map<std::string, Tensor> with_full_conv_weights(const Graph& model, std::map<std::string, Tensor> trained) {
  return with_full_conv_tensors(model, std::move(trained), false);
}

std::map<std::string, Tensor> with_full_conv_gradients(const Graph& model, std::map<std::string, Tensor> gradients) {
  return with_full_conv_tensors(model, std::move(gradients), true);
}

int keep_live_conv_taps(const Graph& model, std::map<std::string, Tensor>& tensors,
                        std::map<std::string, Tensor>& optimizer_state) {
  int converted = 0;
  for (const LiveConvTaps& taps : live_conv_taps(model)) {
    auto whole = tensors.find(taps.weight);
    if (whole == tensors.end() || tensors.count(taps.live)) continue;
    const Tensor& w = *model.value(*model.find_value(taps.weight)).data;
    if (whole->second.dtype() != DType::Float32 || whole->second.numel() != w.numel())
      throw Error("'" + taps.weight + "' is not a float32 tensor of the model's sizes");
    tensors[taps.live] = live_box(whole->second, w.sizes(), taps);
    tensors.erase(whole);
    move_weight_state(optimizer_state, taps.weight, taps.live, w.numel(),
                      [&](const Tensor& t) { return live_box(t, w.sizes(), taps); });
    ++converted;
  }
  return converted;
}

}  // namespace onnxtrain
