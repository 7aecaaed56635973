// executor/parameter_server: one worker is sequential training (Trainer::train_step) bit for bit, with
// any number of shards, and prediction is then a no-op; two workers forced to interleave see stale
// gradients (bounded as the interleaving dictates) and the report adds up; a predicted pull is the stored
// weights moved s momentum steps ahead (recomputed here); asynchronous workers still
// learn a learnable task, with and without prediction; in fp16 one worker skips overflowing pushes as
// Trainer skips steps.
#include "executor/parameter_server.h"

#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <numeric>

#include "frontend/data_loader.h"
#include "frontend/dataset.h"
#include "frontend/importer.h"
#include "graph/error.h"
#include "tests/replica_fixtures.h"

namespace onnxtrain {
namespace {

using testing_support::Batches;
using testing_support::batches_of;
using testing_support::momentum_sgd;

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";

struct TrainedRun {
  std::vector<float> losses;
  std::map<std::string, Tensor> weights;
  ParameterServerReport report;
};

TrainedRun run_ps(const std::string& model, const Batches& batches, ParameterServerOptions options) {
  ImportedModel m = import_model(kModels + model);
  ParameterServerTrainer ps(m.graph, std::move(options));
  size_t i = 0;
  TrainedRun r;
  std::vector<int64_t> reported;
  r.losses = ps.train(
      static_cast<int64_t>(batches.size()), [&] { return batches[i++]; },
      [&](int64_t step, float) { reported.push_back(step); });
  // on_loss comes on this thread in mini-batch order, once per mini-batch.
  std::vector<int64_t> expected(batches.size());
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(reported, expected);
  r.weights = ps.trained_initializers();
  r.report = ps.report();
  return r;
}

void expect_bitwise_equal(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.contains(name)) << name;
    EXPECT_EQ(std::memcmp(t.raw(), b.at(name).raw(), t.nbytes()), 0) << name;
  }
}

// The report's fields agree with each other and with the run.
void expect_consistent(const ParameterServerReport& r, int64_t steps) {
  ASSERT_EQ(static_cast<int64_t>(r.pushes.size()), steps);
  const std::vector<int64_t> per_worker = r.per_worker(), histogram = r.histogram();
  EXPECT_EQ(std::accumulate(per_worker.begin(), per_worker.end(), int64_t{0}), steps);
  EXPECT_EQ(std::accumulate(histogram.begin(), histogram.end(), int64_t{0}), steps);
  for (int64_t v : r.shard_versions) EXPECT_EQ(v, steps);  // every push updates every shard once
  double weighted = 0;
  for (size_t s = 0; s < histogram.size(); ++s) weighted += static_cast<double>(s) * static_cast<double>(histogram[s]);
  EXPECT_NEAR(r.mean_staleness(), weighted / static_cast<double>(steps), 1e-12);
  for (size_t i = 0; i < r.pushes.size(); ++i) {
    const auto& p = r.pushes[i];
    EXPECT_EQ(p.mini_batch, static_cast<int64_t>(i));
    ASSERT_EQ(static_cast<int>(p.shard_staleness.size()), r.servers);
    EXPECT_EQ(p.staleness, *std::max_element(p.shard_staleness.begin(), p.shard_staleness.end()));
    EXPECT_GT(p.compute_seconds, 0);
    EXPECT_GE(p.exchange_seconds, 0);
  }
  // The per-worker sums are the pushes' times, by worker.
  const std::vector<double> busy = r.worker_compute_seconds(), blocked = r.worker_exchange_seconds();
  ASSERT_EQ(static_cast<int>(busy.size()), r.workers);
  double busy_sum = 0, pushes_sum = 0;
  for (double b : busy) busy_sum += b;
  for (const auto& p : r.pushes) pushes_sum += p.compute_seconds;
  EXPECT_NEAR(busy_sum, pushes_sum, 1e-9);
  EXPECT_EQ(blocked.size(), busy.size());
}

TEST(ParameterServer, OneWorkerIsSequentialTrainingBitForBit) {
  const Batches cnn = batches_of("synthetic:1,28,28:10:256", 16, 5);
  const Batches resnet = batches_of("synthetic:3,32,32:10:96", 8, 3);  // BatchNorm statistics on the shards
  for (const auto& [model, batches] :
       {std::pair{"cnn_opset17.onnx", &cnn}, std::pair{"resnet_opset17.onnx", &resnet}}) {
    ImportedModel m = import_model(kModels + model);
    Trainer single(m.graph, momentum_sgd());
    std::vector<float> single_losses;
    for (const auto& [x, y] : *batches) single_losses.push_back(single.train_step(x, y));
    std::map<std::string, Tensor> single_weights;
    for (const auto& [name, t] : single.trained_initializers()) single_weights[name] = t.clone();
    for (int servers : {1, 3}) {
      SCOPED_TRACE(std::string(model) + ", " + std::to_string(servers) + " shards");
      const TrainedRun ps = run_ps(model, *batches, {.trainer = momentum_sgd(), .servers = servers, .workers = 1});
      EXPECT_EQ(ps.losses, single_losses);
      expect_bitwise_equal(ps.weights, single_weights);
      expect_consistent(ps.report, static_cast<int64_t>(batches->size()));
      EXPECT_EQ(ps.report.max_staleness(), 0);
    }
  }
}

// fp16: one worker with its own loss scaler skips and steps exactly as Trainer::train_step does, bit for
// bit. A start scale of 2^20 overflows float16 at first, so the run has skipped pushes and applied ones.
TEST(ParameterServer, OneFp16WorkerSkipsAndStepsAsTrainerDoes) {
  const Batches batches = batches_of("synthetic:1,28,28:10:256", 16, 8);
  TrainerOptions o = momentum_sgd();
  o.precision = Precision::fp16;
  o.loss_scaler = {.init_scale = std::ldexp(1.0, 20), .growth_interval = 2};
  ImportedModel m = import_model(kModels + "cnn_opset17.onnx");
  Trainer single(m.graph, o);
  std::vector<float> single_losses;
  for (const auto& [x, y] : batches) single_losses.push_back(single.train_step(x, y));
  const TrainedRun ps = run_ps("cnn_opset17.onnx", batches, {.trainer = o, .servers = 2, .workers = 1});
  const int64_t skipped = single.loss_scaler()->skipped_steps();
  ASSERT_GT(skipped, 0) << "the start scale must overflow";
  ASSERT_LT(skipped, static_cast<int64_t>(batches.size())) << "and later scales fit";
  EXPECT_EQ(ps.report.skipped_pushes(), skipped);
  for (int64_t v : ps.report.shard_versions) EXPECT_EQ(v, single.step()) << "a skipped push updates no shard";
  EXPECT_EQ(ps.losses, single_losses);
  expect_bitwise_equal(ps.weights, single.trained_initializers());
  EXPECT_NE(format_parameter_server_report(ps.report).find("pushes skipped for inf/NaN"), std::string::npos);
  // Evaluation restores a worker with its loss scaler too.
  ImportedModel again = import_model(kModels + "cnn_opset17.onnx");
  ParameterServerTrainer evaluated(again.graph, {.trainer = o, .workers = 2});
  evaluated.train(2, [&] { return batches[0]; });
  const Trainer::Evaluation e = evaluated.evaluate(batches[1].first, batches[1].second, 8);
  EXPECT_TRUE(std::isfinite(e.loss));
}

// Staleness 0 predicts nothing: one worker with prediction equals one without, bit for bit.
TEST(ParameterServer, PredictionWithoutStalenessIsANoOp) {
  const Batches batches = batches_of("synthetic:1,28,28:10:256", 16, 4);
  const TrainedRun plain = run_ps("cnn_opset17.onnx", batches, {.trainer = momentum_sgd(), .servers = 2, .workers = 1});
  const TrainedRun predicted =
      run_ps("cnn_opset17.onnx", batches, {.trainer = momentum_sgd(), .servers = 2, .workers = 1, .predict = true});
  EXPECT_EQ(predicted.losses, plain.losses);
  expect_bitwise_equal(predicted.weights, plain.weights);
  EXPECT_EQ(predicted.report.predicted_pushes(), 0);
}

// Parameters are split over the shards by bytes: no shard exceeds another by more than its largest tensor.
TEST(ParameterServer, ShardsBalanceBytes) {
  ImportedModel m = import_model(kModels + "cnn_opset17.onnx");
  ParameterServerTrainer ps(m.graph, {.trainer = momentum_sgd(), .servers = 2, .workers = 1});
  const ParameterServerReport& r = ps.report();
  int64_t largest = 0, total = 0;
  for (const auto& [name, t] : ps.trained_initializers()) {
    largest = std::max<int64_t>(largest, static_cast<int64_t>(t.nbytes()));
    total += static_cast<int64_t>(t.nbytes());
    EXPECT_GE(ps.shard_of(name), 0);
    EXPECT_LT(ps.shard_of(name), 2);
  }
  ASSERT_EQ(r.shard_bytes.size(), 2u);
  EXPECT_EQ(r.shard_bytes[0] + r.shard_bytes[1], total);
  EXPECT_LE(std::abs(r.shard_bytes[0] - r.shard_bytes[1]), largest);
  EXPECT_EQ(r.pull_bytes, total);
}

// Two workers meet at a barrier between computing and pushing, so in every round both have pulled
// before either pushes: the second push of round k (mini-batches 2k, 2k+1) is at least 1 stale. A pull
// can miss at most the other worker's push of the previous round and of this one: staleness <= 2.
TEST(ParameterServer, InterleavedWorkersSeeStaleGradients) {
  const int64_t steps = 8;
  const Batches batches = batches_of("synthetic:1,28,28:10:256", 16, static_cast<int>(steps));
  for (bool predict : {false, true}) {
    SCOPED_TRACE(predict ? "with prediction" : "without prediction");
    std::barrier meet(2);
    const TrainedRun ps = run_ps(
        "mlp_opset17.onnx", batches,
        {.trainer = momentum_sgd(), .servers = 2, .workers = 2, .predict = predict, .before_push = [&](int, int64_t) {
           meet.arrive_and_wait();
         }});
    const ParameterServerReport& r = ps.report;
    expect_consistent(r, steps);
    EXPECT_EQ(r.per_worker(), (std::vector<int64_t>{steps / 2, steps / 2}));  // one mini-batch each per round
    for (int64_t k = 0; k < steps / 2; ++k) {
      const auto& a = r.pushes[static_cast<size_t>(2 * k)];
      const auto& b = r.pushes[static_cast<size_t>(2 * k + 1)];
      EXPECT_NE(a.worker, b.worker) << "round " << k;
      EXPECT_GE(std::max(a.staleness, b.staleness), 1) << "round " << k;
    }
    EXPECT_LE(r.max_staleness(), 2);
    EXPECT_GT(r.mean_staleness(), 0);
    for (float l : ps.losses) EXPECT_TRUE(std::isfinite(l));
    if (predict) {
      // A worker predicts from its second push on, once it has measured staleness; never on its first.
      EXPECT_GT(r.predicted_pushes(), 0);
      std::vector<bool> seen(2, false);
      for (const auto& p : r.pushes) {
        if (!seen[static_cast<size_t>(p.worker)]) {
          EXPECT_EQ(p.predicted_steps, 0) << "mini-batch " << p.mini_batch;
        }
        seen[static_cast<size_t>(p.worker)] = true;
        EXPECT_LE(p.predicted_steps, 2.0);
      }
    } else {
      EXPECT_EQ(r.predicted_pushes(), 0);
    }
  }
}

// --ps-predict's value: with momentum 0.9 (no dampening), what a worker pulls with s > 0 is the stored W
// moved s momentum steps ahead along the gradient the buffer stands for: ĝ = v_t / Σ_{j<t} μ^j (what a
// constant gradient g makes v_t), then s times v ← μv + ĝ, W ← W − lr·v. Recomputed here from the shard's
// state at the pull, independently of executor/weight_prediction.cc; s is the worker's mean staleness,
// rounded, as its push reports.
TEST(ParameterServer, PredictedPullsAreTheMomentumStepsAheadOfTheStoredWeights) {
  const int64_t steps = 8;
  const Batches batches = batches_of("synthetic:1,28,28:10:256", 16, static_cast<int>(steps));
  const double lr = 0.05, mu = 0.9;
  std::barrier meet(2);
  std::mutex seen_mutex;
  std::map<int64_t, int64_t> steps_of_mini_batch;  // the largest s over the shards
  int64_t checked = 0, moved = 0;
  double worst = 0;
  const TrainedRun ps =
      run_ps("mlp_opset17.onnx", batches,
             {.trainer = momentum_sgd(lr),
              .servers = 2,
              .workers = 2,
              .predict = true,
              .before_push = [&](int, int64_t) { meet.arrive_and_wait(); },
              .after_pull =
                  [&](const PulledParameter& p) {
                    std::lock_guard<std::mutex> lock(seen_mutex);
                    int64_t& largest = steps_of_mini_batch[p.mini_batch];
                    largest = std::max(largest, p.steps);
                    const auto stored = p.stored.data<float>();
                    const auto pulled = p.pulled.data<float>();
                    if (p.steps == 0 || p.state.step == 0) {  // nothing to predict from: Ŵ = W
                      EXPECT_EQ(std::memcmp(stored.data(), pulled.data(), p.stored.nbytes()), 0) << p.name;
                      return;
                    }
                    const auto buffer = p.state.tensor("momentum_buffer");
                    const double made = (1 - std::pow(mu, static_cast<double>(p.state.step))) / (1 - mu);
                    for (size_t i = 0; i < stored.size(); ++i) {
                      const double g = buffer[i] / made;
                      double v = buffer[i], w = stored[i];
                      for (int64_t j = 0; j < p.steps; ++j) {
                        v = mu * v + g;
                        w -= lr * v;
                      }
                      // float32: the motion may be a few ulps of W
                      const double allowed =
                          1e-3 * std::abs(w - stored[i]) + 4 * std::numeric_limits<float>::epsilon() * std::abs(w);
                      worst = std::max(worst, std::abs(pulled[i] - w) / (allowed + 1e-30));
                      moved += pulled[i] != stored[i];
                      ++checked;
                    }
                  }});
  EXPECT_GT(checked, 0) << "no pull was predicted";
  EXPECT_GT(moved, checked / 2) << "predicted pulls left the weights where they were";
  EXPECT_LE(worst, 1.0) << "largest error relative to the allowed (1e-3 of the predicted motion + 4 ulp)";
  for (const auto& push : ps.report.pushes)
    EXPECT_EQ(steps_of_mini_batch.at(push.mini_batch), std::llround(push.predicted_steps))
        << "mini-batch " << push.mini_batch;
}

// Asynchronous workers on a learnable task (labels = argmax of a fixed linear map): the loss on the
// training rows falls well below its start, with and without prediction, and accuracy beats chance.
TEST(ParameterServer, AsynchronousWorkersLearn) {
  const Batches batches = batches_of("synthetic:1,28,28:10:512", 32, 96);
  Dataset data = load_dataset("synthetic:1,28,28:10:512", {.normalize = Normalization::MeanStd, .seed = 4});
  for (bool predict : {false, true}) {
    SCOPED_TRACE(predict ? "with prediction" : "without prediction");
    ImportedModel m = import_model(kModels + "mlp_opset17.onnx");
    ParameterServerTrainer ps(m.graph, {.trainer = momentum_sgd(0.05), .servers = 2, .workers = 3, .predict = predict});
    const Trainer::Evaluation before = ps.evaluate(data.inputs, data.labels, 256);
    size_t i = 0;
    ps.train(static_cast<int64_t>(batches.size()), [&] { return batches[i++]; });
    const Trainer::Evaluation after = ps.evaluate(data.inputs, data.labels, 256);
    EXPECT_LT(after.loss, 0.5 * before.loss) << before.loss << " -> " << after.loss;
    EXPECT_GT(after.accuracy, 0.3);
    expect_consistent(ps.report(), static_cast<int64_t>(batches.size()));
    EXPECT_EQ(ps.steps(), static_cast<int64_t>(batches.size()));
  }
}

// A worker's error stops the run and reaches the caller; bad sizes are refused.
TEST(ParameterServer, ErrorsReachTheCaller) {
  ImportedModel m = import_model(kModels + "mlp_opset17.onnx");
  EXPECT_THROW(ParameterServerTrainer(m.graph, {.trainer = momentum_sgd(), .servers = 0}), Error);
  EXPECT_THROW(ParameterServerTrainer(m.graph, {.trainer = momentum_sgd(), .workers = 0}), Error);
  ParameterServerTrainer ps(m.graph, {.trainer = momentum_sgd(), .servers = 2, .workers = 2});
  const Batches batches = batches_of("synthetic:1,28,28:10:64", 8, 2);
  int calls = 0;
  EXPECT_THROW(ps.train(6,
                        [&]() -> std::pair<Tensor, Tensor> {
                          if (++calls == 3) throw Error("the data source failed");
                          return batches[static_cast<size_t>(calls % 2)];
                        }),
               Error);
}

}  // namespace
}  // namespace onnxtrain
