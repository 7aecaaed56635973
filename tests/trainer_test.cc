// executor/trainer: a training step lowers the loss, updates the graph's parameter tensors in place (and
// the session sees the update), BatchNorm running statistics follow the batches, evaluation runs the
// inference form of the graph.
#include "executor/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

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
