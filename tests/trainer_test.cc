// executor/trainer: a training step lowers the loss, updates the graph's parameter tensors in place (and
// the session sees the update), BatchNorm running statistics follow the batches, evaluation runs the
// inference form of the graph.
#include "executor/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "frontend/data_loader.h"
#include "frontend/dataset.h"
#include "frontend/importer.h"

namespace onnxtrain {
namespace {

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";

TrainerOptions sgd(double lr) {
  TrainerOptions o;
  o.loss = parse_loss_spec("cross-entropy");
  o.schedule.base_lr = lr;
  return o;
}

TEST(Trainer, SgdStepsLowerTheLossAndChangeTheParameters) {
  ImportedModel model = import_model(kModels + "mlp_opset17.onnx");
  Dataset data = load_dataset("synthetic:1,28,28:10:256", {.normalize = Normalization::MeanStd, .seed = 3});
  Trainer trainer(model.graph, sgd(0.1));
  std::map<std::string, Tensor> before;
  for (const auto& [name, t] : trainer.trained_initializers()) before[name] = t.clone();
  ASSERT_FALSE(before.empty());

  // The same batch 20 times: plain SGD must fit it.
  DataLoader loader(data, {.batch = 32, .shuffle = false, .prefetch = false});
  Batch b = loader.next();
  const float first = trainer.train_step(b.x, b.y);
  float last = first;
  for (int i = 1; i < 20; ++i) last = trainer.train_step(b.x, b.y);
  EXPECT_LT(last, 0.8 * first) << "first " << first << " last " << last;
  EXPECT_EQ(trainer.optimizer().global_step(), 20);

  for (const auto& [name, t] : trainer.trained_initializers()) {
    auto a = before.at(name).data<float>();
    auto now = t.data<float>();
    double diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff += std::abs(a[i] - now[i]);
    EXPECT_GT(diff, 0) << name << " did not change";
  }
}

// The session reads the initializer Tensors of its graph on every run: writing into them (what the
// optimizer does) changes the next run's result. Zeroing every parameter makes the logits zero, so the
// cross-entropy is exactly log(10) in both the training and the evaluation graph.
TEST(Trainer, InPlaceUpdatesAreSeenByTheSessions) {
  ImportedModel model = import_model(kModels + "mlp_opset17.onnx");
  Dataset data = load_dataset("synthetic:1,28,28:10:64", {.seed = 1});
  Trainer trainer(model.graph, sgd(0.01));
  DataLoader loader(data, {.batch = 16, .shuffle = false, .prefetch = false});
  Batch b = loader.next();
  const float loss = trainer.train_step(b.x, b.y);
  EXPECT_GT(std::abs(loss - std::log(10.0f)), 1e-3);
  for (auto [name, t] : trainer.trained_initializers()) std::fill(t.data<float>().begin(), t.data<float>().end(), 0.0f);
  Trainer::Evaluation e = trainer.evaluate(data.inputs, data.labels, 32);
  EXPECT_EQ(e.samples, 64);
  EXPECT_NEAR(e.loss, std::log(10.0), 1e-5);
  EXPECT_NEAR(trainer.train_step(b.x, b.y), std::log(10.0f), 1e-5);
}

TEST(Trainer, BatchNormRunningStatisticsFollowTheBatches) {
  ImportedModel model = import_model(kModels + "resnet_opset17.onnx");
  Dataset data = load_dataset("synthetic:3,32,32:10:32", {.normalize = Normalization::MeanStd, .seed = 2});
  Trainer trainer(model.graph, sgd(0.01));
  ASSERT_GT(trainer.running_stat_nodes(), 0);
  std::map<std::string, Tensor> before;
  for (const auto& [name, t] : trainer.trained_initializers()) before[name] = t.clone();
  DataLoader loader(data, {.batch = 16, .shuffle = false, .prefetch = false});
  Batch b = loader.next();
  trainer.train_step(b.x, b.y);
  int changed_states = 0;
  const Graph& g = trainer.training_graph().graph;
  for (ValueId id : g.initializers) {
    const Value& v = g.value(id);
    if (v.role != ValueRole::State) continue;
    auto a = before.at(v.name).data<float>();
    auto now = v.data->data<float>();
    changed_states += !std::equal(a.begin(), a.end(), now.begin());
  }
  EXPECT_GT(changed_states, 0);
  Trainer::Evaluation e = trainer.evaluate(data.inputs, data.labels, 8);
  EXPECT_TRUE(std::isfinite(e.loss));
  EXPECT_GE(e.accuracy, 0.0);
}

// The unbiased running variance (torch's) is the population one (ONNX's) scaled by N/(N−1) in its
// (1−m) share: from the same weights and batch, unbiased − m·old = (population − m·old)·N/(N−1).
TEST(Trainer, UnbiasedRunningVarianceScalesTheBatchVarianceByBesselsCorrection) {
  ImportedModel model = import_model(kModels + "resnet_opset17.onnx");
  Dataset data = load_dataset("synthetic:3,32,32:10:16", {.normalize = Normalization::MeanStd, .seed = 2});
  TrainerOptions unbiased = sgd(0.01), population = sgd(0.01);
  population.running_variance = RunningVariance::population;
  Trainer a(model.graph, unbiased);
  ImportedModel copy = import_model(kModels + "resnet_opset17.onnx");  // its own initializer buffers
  Trainer b(copy.graph, population);
  const std::map<std::string, Tensor> initial = [&] {
    std::map<std::string, Tensor> m;
    for (const auto& [name, t] : a.trained_initializers()) m[name] = t.clone();
    return m;
  }();
  DataLoader loader(data, {.batch = 16, .shuffle = false, .prefetch = false});
  Batch batch = loader.next();
  a.train_step(batch.x, batch.y);
  b.train_step(batch.x, batch.y);
  const std::map<std::string, Tensor> after_a = a.trained_initializers(), after_b = b.trained_initializers();
  int variances = 0;
  for (NodeId id : a.training_graph().graph.order()) {
    const Node& n = a.training_graph().graph.node(id);
    if (n.op_type != "BatchNormalization") continue;
    const std::string& var = a.training_graph().graph.value(n.inputs[4]).name;
    const int64_t values = 16 * a.training_graph().graph.value(n.inputs[0]).shape.dims[2].value() *
                           a.training_graph().graph.value(n.inputs[0]).shape.dims[3].value();
    const double m = n.attr_float("momentum", 0.9), bessel = static_cast<double>(values) / (values - 1);
    std::span<const float> old = initial.at(var).data<float>(), ua = after_a.at(var).data<float>(),
                           pb = after_b.at(var).data<float>();
    for (size_t c = 0; c < old.size(); ++c) {
      EXPECT_NEAR(ua[c] - m * old[c], (pb[c] - m * old[c]) * bessel, 1e-5 * std::abs(ua[c]) + 1e-7)
          << var << "[" << c << "]";
    }
    ++variances;
  }
  EXPECT_GT(variances, 0);
}

// compute_gradients is what a plain-SGD step applies: w_after = w_before − lr·g.
TEST(Trainer, ComputeGradientsAreWhatSgdApplies) {
  ImportedModel model = import_model(kModels + "cnn_opset17.onnx");
  Dataset data = load_dataset("synthetic:1,28,28:10:16", {.normalize = Normalization::MeanStd, .seed = 4});
  TrainerOptions o = sgd(0.5);
  o.optimizer.momentum = 0;
  Trainer trainer(model.graph, o);
  DataLoader loader(data, {.batch = 16, .shuffle = false, .prefetch = false});
  Batch b = loader.next();
  float loss = 0;
  std::map<std::string, Tensor> grads = trainer.compute_gradients(b.x, b.y, &loss);
  for (auto& [name, g] : grads) g = g.clone();
  EXPECT_EQ(trainer.step(), 0);
  std::map<std::string, Tensor> before;
  for (const auto& [name, t] : trainer.trained_initializers()) before[name] = t.clone();
  EXPECT_EQ(trainer.train_step(b.x, b.y), loss);
  ASSERT_FALSE(grads.empty());
  for (const auto& [name, t] : trainer.trained_initializers()) {
    if (!grads.contains(name)) continue;
    std::span<const float> w0 = before.at(name).data<float>(), w1 = t.data<float>(), g = grads.at(name).data<float>();
    for (size_t i = 0; i < g.size(); ++i)
      EXPECT_NEAR((w0[i] - w1[i]) / 0.5, g[i], 1e-5 + 1e-3 * std::abs(g[i])) << name;
  }
}

std::vector<float> losses_of(Trainer& trainer, DataLoader& loader, int steps) {
  std::vector<float> losses;
  for (int i = 0; i < steps; ++i) {
    Batch b = loader.next();
    losses.push_back(trainer.train_step(b.x, b.y));
  }
  return losses;
}

Dataset token_data(int64_t rows, uint64_t seed) {
  Dataset d;
  d.inputs = Tensor(DType::Int64, {rows, 16});
  d.labels = Tensor(DType::Int64, {rows});
  std::mt19937_64 rng(seed);
  for (int64_t& t : d.inputs.data<int64_t>()) t = static_cast<int64_t>(rng() % 100);
  for (int64_t& y : d.labels.data<int64_t>()) y = static_cast<int64_t>(rng() % 10);
  return d;
}

// The transformer has 7 Dropout nodes: with the same seed two runs give the same losses bit for bit;
// another seed draws other masks; with dropout off the run is the same whatever the seed.
TEST(Trainer, DropoutIsSeededAndRepeatable) {
  const Dataset data = token_data(64, 11);
  auto run = [&](uint64_t seed, bool dropout) {
    ImportedModel model = import_model(kModels + "transformer_opset17.onnx");
    TrainerOptions o = sgd(0.05);
    o.seed = seed;
    o.dropout = dropout;
    Trainer trainer(model.graph, o);
    DataLoader loader(data, {.batch = 16, .shuffle = true, .seed = 1, .prefetch = false});
    return losses_of(trainer, loader, 6);
  };
  const std::vector<float> first = run(1, true);
  EXPECT_EQ(run(1, true), first);
  EXPECT_NE(run(2, true), first);
  EXPECT_EQ(run(1, false), run(2, false));
  EXPECT_NE(run(1, false), first);
}

// restore() puts a fresh trainer where another was after k steps: the next steps are bit-identical,
// Dropout masks included (their run index is the step).
TEST(Trainer, RestoredTrainerContinuesBitForBit) {
  const Dataset data = token_data(96, 5);
  TrainerOptions o = sgd(0.05);
  o.optimizer.kind = OptimizerKind::adamw;
  o.optimizer.weight_decay = 0.01;
  o.seed = 3;
  ImportedModel model = import_model(kModels + "transformer_opset17.onnx");
  Trainer whole(model.graph, o);
  DataLoader loader(data, {.batch = 16, .shuffle = true, .seed = 2, .prefetch = false});
  losses_of(whole, loader, 3);
  std::map<std::string, Tensor> saved_params, saved_state = whole.optimizer().state_tensors();
  for (const auto& [name, t] : whole.trained_initializers()) saved_params[name] = t.clone();
  const LoaderPosition position = loader.position();
  const std::vector<float> rest = losses_of(whole, loader, 3);

  ImportedModel fresh = import_model(kModels + "transformer_opset17.onnx");
  Trainer resumed(fresh.graph, o);
  resumed.restore(saved_params, saved_state);
  EXPECT_EQ(resumed.step(), 3);
  DataLoader loader2(data, {.batch = 16, .shuffle = true, .seed = 2, .prefetch = false});
  loader2.seek(position.epoch, position.index);
  EXPECT_EQ(losses_of(resumed, loader2, 3), rest);
  const std::map<std::string, Tensor> a = whole.trained_initializers(), b = resumed.trained_initializers();
  for (const auto& [name, t] : a) {
    ASSERT_EQ(std::memcmp(t.raw(), b.at(name).raw(), static_cast<size_t>(t.numel()) * 4), 0) << name;
  }
  // A state of another model is refused, naming the parameter.
  saved_params.begin()->second = Tensor(DType::Float32, {1});
  try {
    resumed.restore(saved_params, saved_state);
    FAIL() << "restore accepted a wrong-sized parameter";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(saved_params.begin()->first), std::string::npos) << e.what();
  }
}

TEST(Trainer, InferenceGraphTurnsBatchNormBackToInferenceMode) {
  ImportedModel model = import_model(kModels + "resnet_opset17.onnx");
  Trainer trainer(model.graph, sgd(0.01));
  Graph eval = make_inference_graph(trainer.training_graph().graph);
  for (NodeId id : eval.order()) {
    const Node& n = eval.node(id);
    if (n.op_type != "BatchNormalization") continue;
    EXPECT_EQ(n.attr_int("training_mode", 0), 0) << n.name;
    EXPECT_EQ(n.outputs.size(), 1u) << n.name;
  }
}

}  // namespace
}  // namespace onnxtrain
