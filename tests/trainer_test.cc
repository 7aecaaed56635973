// executor/trainer: a training step lowers the loss, updates the graph's parameter tensors in place (and
// the session sees the update), BatchNorm running statistics follow the batches, evaluation runs the
// inference form of the graph.
#include "executor/trainer.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "frontend/data_loader.h"
#include "frontend/dataset.h"
#include "frontend/importer.h"
#include "tests/replica_fixtures.h"

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
  EXPECT_EQ(trainer.running_stat_nodes(), 6);  // models/README.md: 6 BatchNorm nodes, a mean and a variance each
  EXPECT_EQ(trainer.running_statistics_count(), 12);
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

double max_difference(std::span<const float> a, std::span<const float> b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  return worst;
}

// --accumulate K: a step over a batch in K row slices applies the batch's mean gradient. The transformer
// (7 Dropout nodes, LayerNorm only) gives the same loss and update as one pass over the batch, up to the
// summation order: each slice draws its rows' masks of the whole batch.
TEST(Trainer, AccumulatedStepIsTheWholeBatchsStep) {
  const Dataset data = token_data(32, 4);
  DataLoader loader(data, {.batch = 16, .shuffle = false, .prefetch = false});
  const Batch b = loader.next();
  auto step = [&](int64_t accumulate, std::map<std::string, Tensor>& params) {
    ImportedModel model = import_model(kModels + "transformer_opset17.onnx");
    TrainerOptions o = sgd(0.5);
    o.seed = 9;
    o.accumulate = accumulate;
    Trainer trainer(model.graph, o);
    const float loss = trainer.train_step(b.x, b.y);
    for (const auto& [name, t] : trainer.trained_initializers()) params[name] = t.clone();
    return loss;
  };
  std::map<std::string, Tensor> whole, sliced, uneven;
  const float loss = step(1, whole);
  EXPECT_NEAR(step(4, sliced), loss, 1e-5);
  EXPECT_NEAR(step(3, uneven), loss, 1e-5);  // slices of 6, 5 and 5 rows, weighed by their share
  for (const auto& [name, t] : whole) {
    EXPECT_LT(max_difference(t.data<float>(), sliced.at(name).data<float>()), 1e-5) << name;
    EXPECT_LT(max_difference(t.data<float>(), uneven.at(name).data<float>()), 1e-5) << name;
  }
  // The step moved the weights far more than that tolerance.
  ImportedModel initial = import_model(kModels + "transformer_opset17.onnx");
  Trainer fresh(initial.graph, sgd(0.5));
  double moved = 0;
  for (const auto& [name, t] : fresh.trained_initializers())
    moved = std::max(moved, max_difference(t.data<float>(), whole.at(name).data<float>()));
  EXPECT_GT(moved, 1e-3);
}

// With BatchNorm each slice is normalised by its own statistics, as in PyTorch: the accumulated gradient
// is the mean of the slices' gradients, and the running statistics follow the slices one after another.
TEST(Trainer, AccumulatedStepFollowsEachSliceLikeConsecutivePasses) {
  Dataset data = load_dataset("synthetic:3,32,32:10:16", {.normalize = Normalization::MeanStd, .seed = 2});
  DataLoader loader(data, {.batch = 16, .shuffle = false, .prefetch = false});
  const Batch b = loader.next();
  ImportedModel model = import_model(kModels + "resnet_opset17.onnx"),
                copy = import_model(kModels + "resnet_opset17.onnx");
  TrainerOptions o = sgd(0.1);
  o.accumulate = 2;
  Trainer accumulating(model.graph, o), plain(copy.graph, sgd(0.1));
  float loss = 0, first_loss = 0, second_loss = 0;
  const std::map<std::string, Tensor> both = accumulating.forward_backward(b.x, b.y, &loss);
  const std::map<std::string, Tensor> first =
      plain.forward_backward(b.inputs().slice_rows(0, 8), slice_rows(b.y, 0, 8), &first_loss);
  const std::map<std::string, Tensor> second =
      plain.forward_backward(b.inputs().slice_rows(8, 16), slice_rows(b.y, 8, 16), &second_loss);
  EXPECT_NEAR(loss, (first_loss + second_loss) / 2, 1e-5);
  for (const auto& [name, g] : both) {
    std::vector<float> mean(static_cast<size_t>(g.numel()));
    for (size_t i = 0; i < mean.size(); ++i)
      mean[i] = (first.at(name).data<float>()[i] + second.at(name).data<float>()[i]) / 2;
    EXPECT_LT(max_difference(g.data<float>(), mean), 1e-5) << name;
  }
  const std::map<std::string, Tensor> stats = accumulating.running_statistics(), expected = plain.running_statistics();
  ASSERT_FALSE(stats.empty());
  for (const auto& [name, t] : stats)
    EXPECT_LT(max_difference(t.data<float>(), expected.at(name).data<float>()), 1e-6) << name;
  // 16 rows and K = 32 (an epoch's last, short batch): one pass per row, the gradients of K = 16 bit for
  // bit. It was an error after the epoch's full batches had trained (an outside check).
  TrainerOptions many = sgd(0.1), per_row = sgd(0.1);
  many.accumulate = 32;
  per_row.accumulate = 16;
  ImportedModel third = import_model(kModels + "resnet_opset17.onnx"),
                fourth = import_model(kModels + "resnet_opset17.onnx");
  Trainer more_than_rows(third.graph, many), one_per_row(fourth.graph, per_row);
  const std::map<std::string, Tensor> capped = more_than_rows.forward_backward(b.x, b.y, &loss);
  const std::map<std::string, Tensor> rows = one_per_row.forward_backward(b.x, b.y, &first_loss);
  EXPECT_EQ(loss, first_loss);
  for (const auto& [name, g] : rows)
    EXPECT_EQ(max_difference(capped.at(name).data<float>(), g.data<float>()), 0) << name;
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

namespace onnxtrain {
namespace {

// train_step on the CPU steps from the gradient buffers and the taps the kernels kept (trainer_kept_step.cc),
// split over the OpenMP team: the same weights and losses, bit for bit, as Optimizer::step on the dense
// gradients (clipping at 1e30 never clips but takes that path), at 1, 2 and 3 threads, on a model whose
// convolutions keep taps, for momentum SGD and Adam.
TEST(Trainer, KeptStepEqualsTheDenseStepBitForBit) {
  using testing_support::Batches, testing_support::batches_of, testing_support::momentum_sgd;
  const std::string model = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/small_planes/small_plane_cnn.onnx";
  const Batches batches = batches_of("synthetic:4,4,4:10:64", 16, 3);
  const int saved_threads = omp_get_max_threads();
  for (OptimizerKind kind : {OptimizerKind::sgd, OptimizerKind::adam}) {
    TrainerOptions kept = testing_support::model_layout_weights(momentum_sgd());
    kept.optimizer.kind = kind;
    TrainerOptions dense = kept;
    dense.clip_grad_norm = 1e30;
    ASSERT_TRUE(Trainer::applies_optimizer_step_alone(kept));
    ASSERT_FALSE(Trainer::applies_optimizer_step_alone(dense));
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(std::string(optimizer_kind_name(kind)) + ", " + std::to_string(threads) + " threads");
      omp_set_num_threads(threads);  // both sides: a kernel's sums may depend on the thread count
      ImportedModel reference_model = import_model(model);
      Trainer reference(reference_model.graph, dense);
      std::vector<float> reference_losses;
      for (const auto& [x, y] : batches) reference_losses.push_back(reference.train_step(x, y));
      ImportedModel m = import_model(model);
      Trainer trainer(m.graph, kept);
      for (size_t i = 0; i < batches.size(); ++i)
        EXPECT_EQ(trainer.train_step(batches[i].first, batches[i].second), reference_losses[i]) << "step " << i;
      const std::map<std::string, Tensor> expected = reference.trained_initializers();
      for (const auto& [name, t] : trainer.trained_initializers())
        EXPECT_EQ(std::memcmp(t.raw(), expected.at(name).raw(), t.nbytes()), 0) << name;
      EXPECT_EQ(trainer.step(), reference.step());
    }
  }
  omp_set_num_threads(saved_threads);
  EXPECT_GE(testing_support::gradients_kept_as_taps(model, batches), 1)
      << "no kernel kept a gradient's taps: the test does not reach that path";
}

}  // namespace
}  // namespace onnxtrain
