// Shared by the pipeline tests (pipeline_trainer_test.cc, pipeline_strategies_test.cc): the models, synthetic
// batches, one-device and pipeline runs, their comparisons, the strategy variants and a log of every pass's
// working weights.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "executor/pipeline/pipeline_trainer.h"
#include "frontend/data_loader.h"
#include "frontend/dataset.h"
#include "frontend/importer.h"
#include "tests/replica_fixtures.h"

namespace onnxtrain::pipeline_testing {

inline const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";

using testing_support::Batches;
using testing_support::momentum_sgd;
using testing_support::token_batches;

inline Batches make_batches(const std::string& shape, int64_t batch, int64_t count, uint64_t seed) {
  Dataset data = load_dataset("synthetic:" + shape + ":10:" + std::to_string(batch * count),
                              {.normalize = Normalization::MeanStd, .seed = seed});
  DataLoader loader(data, {.batch = batch, .shuffle = false, .prefetch = false});
  Batches out;
  for (int64_t i = 0; i < count; ++i) {
    Batch b = loader.next();
    out.emplace_back(b.x, b.y);
  }
  return out;
}

struct TrainedRun {
  std::vector<float> losses;
  std::map<std::string, Tensor> params;
};

inline TrainedRun train_single(const std::string& model, const TrainerOptions& options, const Batches& batches) {
  ImportedModel m = import_model(kModels + model);
  Trainer t(m.graph, options);
  TrainedRun r;
  for (const auto& [x, y] : batches) r.losses.push_back(t.train_step(x, y));
  r.params = t.trained_initializers();
  return r;
}

inline TrainedRun train_pipeline(const std::string& model, const PipelineOptions& options, const Batches& batches,
                                 PipelineReport* report = nullptr) {
  ImportedModel m = import_model(kModels + model);
  PipelineTrainer p(m.graph, options);
  TrainedRun r;
  r.losses = p.train(batches);
  r.params = p.trained_initializers();
  if (report) *report = p.report();
  return r;
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

inline void expect_identical(const TrainedRun& a, const TrainedRun& b, const std::string& what) {
  ASSERT_EQ(a.losses.size(), b.losses.size()) << what;
  for (size_t i = 0; i < a.losses.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a.losses[i], &b.losses[i], sizeof(float)), 0)
        << what << ": loss " << i << ": " << a.losses[i] << " vs " << b.losses[i];
  }
  ASSERT_EQ(a.params.size(), b.params.size()) << what;
  for (const auto& [name, t] : a.params) {
    ASSERT_TRUE(b.params.contains(name)) << what << ": " << name;
    EXPECT_TRUE(same_bits(t, b.params.at(name))) << what << ": " << name << " differs";
  }
}

inline void expect_close(const TrainedRun& a, const TrainedRun& b, double rtol, const std::string& what) {
  ASSERT_EQ(a.losses.size(), b.losses.size()) << what;
  for (size_t i = 0; i < a.losses.size(); ++i)
    EXPECT_NEAR(a.losses[i], b.losses[i], rtol * std::abs(b.losses[i])) << what << ": loss " << i;
  ASSERT_EQ(a.params.size(), b.params.size()) << what;
  for (const auto& [name, t] : a.params) {
    auto x = t.data<float>();
    auto y = b.params.at(name).data<float>();
    ASSERT_EQ(x.size(), y.size()) << what << ": " << name;
    int bad = 0;
    for (size_t i = 0; i < x.size(); ++i) bad += std::abs(x[i] - y[i]) > rtol * std::abs(y[i]) + 1e-7;
    EXPECT_EQ(bad, 0) << what << ": " << name << " has " << bad << " elements beyond rtol " << rtol;
  }
}

inline bool any_difference(const TrainedRun& a, const TrainedRun& b) {
  for (const auto& [name, t] : a.params)
    if (!same_bits(t, b.params.at(name))) return true;
  return false;
}

struct Variant {
  std::string name;
  PipelineStrategy strategy;
  bool vertical_sync = false;
  SpecTrainTarget target = SpecTrainTarget::sequential;
  int64_t micro_batches = 1;
};

inline const std::vector<Variant> kVariants = {
    {"naive", PipelineStrategy::naive},
    {"pipedream", PipelineStrategy::pipedream},
    {"pipedream-vertical-sync", PipelineStrategy::pipedream, true},
    {"spectrain", PipelineStrategy::spectrain},
    {"spectrain-paper", PipelineStrategy::spectrain, false, SpecTrainTarget::paper},
    {"gpipe", PipelineStrategy::gpipe, false, SpecTrainTarget::sequential, 2},
};

inline PipelineOptions options_for(const Variant& v, const TrainerOptions& trainer, int stages) {
  PipelineOptions o;
  o.trainer = trainer;
  o.strategy = v.strategy;
  o.stages = stages;
  o.vertical_sync = v.vertical_sync;
  o.spectrain_target = v.target;
  o.micro_batches = v.micro_batches;
  return o;
}

// Records the working weights of every pass, by (stage, mini-batch, backward).
struct PassLog {
  std::mutex mutex;
  std::map<std::tuple<int, int64_t, bool>, std::pair<int64_t, std::vector<Tensor>>> passes;
  PassObserver observer() {
    return [this](const PassObservation& p) {
      std::vector<Tensor> copy;
      for (const Tensor& t : *p.weights) copy.push_back(t.clone());
      std::lock_guard<std::mutex> lock(mutex);
      passes[{p.stage, p.mini_batch, p.backward}] = {p.version_read, std::move(copy)};
    };
  }
};

inline bool same_weights(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_bits(a[i], b[i])) return false;
  return true;
}

}  // namespace onnxtrain::pipeline_testing
