// Shared by the tests of the replicated trainers (data parallel, central storage, parameter server):
// the optimizer they train with, deterministic shuffled mini-batches of a dataset, token batches, whether
// a model reaches the kept taps' path, and how far one run's weights are from another's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "executor/trainer.h"
#include "frontend/data_loader.h"
#include "frontend/dataset.h"
#include "frontend/importer.h"

namespace onnxtrain::testing_support {

inline TrainerOptions momentum_sgd(double lr = 0.05) {
  TrainerOptions o;
  o.loss = parse_loss_spec("cross-entropy");
  o.optimizer.momentum = 0.9;
  o.schedule.base_lr = lr;
  return o;
}

// The same, training convolution weights in the model's layout: every tap of convolutions with one output
// pixel (not only their live taps, graph/autodiff/live_conv_taps.h), and W of those over small output
// planes (not tap-major, tap_major_conv_weights.h). What the tests of the values the kernels derive
// from W (single-pixel kept taps, tap-product transposes) need, as weight decay and GPUs do.
inline TrainerOptions model_layout_weights(TrainerOptions o) {
  o.live_conv_taps = false;
  o.tap_major_conv_weights = false;
  return o;
}

using Batches = std::vector<std::pair<Tensor, Tensor>>;

// `count` mini-batches of `batch` rows of the dataset `spec`, normalised and shuffled with fixed seeds.
inline Batches batches_of(const std::string& spec, int64_t batch, int count) {
  Dataset data = load_dataset(spec, {.normalize = Normalization::MeanStd, .seed = 4});
  DataLoader loader(data, {.batch = batch, .shuffle = true, .seed = 2, .prefetch = false});
  Batches out;
  for (int i = 0; i < count; ++i) {
    Batch b = loader.next();
    out.emplace_back(b.x, b.y);
  }
  return out;
}

// How many of a model's gradients the kernels keep as taps in a first step on `batches[0]`
// (Trainer::forward_backward_kept): a test of the taps' path asserts that it reaches it.
inline int gradients_kept_as_taps(const std::string& model, const Batches& batches) {
  ImportedModel m = import_model(model);
  Trainer probe(m.graph, model_layout_weights(momentum_sgd()));
  float loss = 0;
  int tapped = 0;
  for (const auto& [name, g] : probe.forward_backward_kept(batches[0].first, batches[0].second, &loss))
    tapped += g.taps != nullptr;
  return tapped;
}

// `count` mini-batches of `batch` rows of 16 random token ids (< 100) with class labels (< 10), for
// models/transformer_opset17.onnx (7 Dropout nodes).
inline Batches token_batches(int64_t batch, int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  Batches out;
  for (int64_t i = 0; i < count; ++i) {
    Tensor x(DType::Int64, {batch, 16}), y(DType::Int64, {batch});
    for (int64_t& v : x.data<int64_t>()) v = static_cast<int64_t>(rng() % 100);
    for (int64_t& v : y.data<int64_t>()) v = static_cast<int64_t>(rng() % 10);
    out.emplace_back(x, y);
  }
  return out;
}

// The largest |a_i − b_i| and the largest |a_i|: b agrees with a to rtol when worst <= rtol · scale.
struct Deviation {
  double worst = 0, scale = 0;
};
inline Deviation deviation(std::span<const float> a, std::span<const float> b) {
  Deviation d;
  for (size_t k = 0; k < a.size(); ++k) {
    d.scale = std::max(d.scale, static_cast<double>(std::abs(a[k])));
    d.worst = std::max(d.worst, static_cast<double>(std::abs(a[k] - b[k])));
  }
  return d;
}

}  // namespace onnxtrain::testing_support
