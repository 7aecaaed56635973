// Shared by the tests of the replicated trainers (data parallel, central storage, parameter server):
// the optimizer they train with and deterministic shuffled mini-batches of a dataset.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "executor/trainer.h"
#include "frontend/data_loader.h"
#include "frontend/dataset.h"

namespace onnxtrain::testing_support {

inline TrainerOptions momentum_sgd(double lr = 0.05) {
  TrainerOptions o;
  o.loss = parse_loss_spec("cross-entropy");
  o.optimizer.momentum = 0.9;
  o.schedule.base_lr = lr;
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

}  // namespace onnxtrain::testing_support
