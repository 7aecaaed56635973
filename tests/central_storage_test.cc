// executor/central_storage: one master copy and one optimizer fed by R replica threads computes exactly
// what DataParallelTrainer's R replicas compute (bit for bit, also with BatchNorm statistics and with a
// batch that does not split evenly, and in bf16 and fp16), and one device's run on the whole mini-batch up
// to summation order.
#include "executor/central_storage.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "executor/data_parallel.h"
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

std::map<std::string, Tensor> owned(const std::map<std::string, Tensor>& m) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : m) out[name] = t.clone();
  return out;
}

struct TrainedRun {
  std::vector<float> losses;
  std::map<std::string, Tensor> weights;
};

TrainedRun run_dp(const std::string& model, int replicas, const Batches& batches,
                  TrainerOptions options = momentum_sgd()) {
  ImportedModel m = import_model(kModels + model);
  DataParallelTrainer dp(m.graph, {.trainer = options, .replicas = replicas});
  size_t i = 0;
  TrainedRun r;
  r.losses = dp.train(static_cast<int64_t>(batches.size()), [&] { return batches[i++]; });
  r.weights = owned(dp.trained_initializers());
  return r;
}

TrainedRun run_central(const std::string& model, int replicas, const Batches& batches,
                       TrainerOptions options = momentum_sgd()) {
  ImportedModel m = import_model(kModels + model);
  CentralStorageTrainer cs(m.graph, {.trainer = options, .replicas = replicas});
  size_t i = 0;
  TrainedRun r;
  std::vector<int64_t> steps;
  r.losses = cs.train(
      static_cast<int64_t>(batches.size()), [&] { return batches[i++]; },
      [&](int64_t step, float) { steps.push_back(step); });
  // on_loss sees the global step indices 0, 1, ...
  for (size_t k = 0; k < steps.size(); ++k) EXPECT_EQ(steps[k], static_cast<int64_t>(k));
  EXPECT_EQ(cs.step(), static_cast<int64_t>(batches.size()));
  r.weights = owned(cs.trained_initializers());
  return r;
}

void expect_bitwise_equal(const TrainedRun& a, const TrainedRun& b) {
  EXPECT_EQ(a.losses, b.losses);
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (const auto& [name, t] : a.weights) {
    ASSERT_TRUE(b.weights.contains(name)) << name;
    EXPECT_EQ(std::memcmp(t.raw(), b.weights.at(name).raw(), t.nbytes()), 0) << name;
  }
}

// 18 rows split over 4 replicas: 5, 5, 4, 4 (uneven weights rows_r / B).
TEST(CentralStorage, EqualsDataParallelBitForBit) {
  const Batches batches = batches_of("synthetic:1,28,28:10:256", 18, 4);
  for (int replicas = 1; replicas <= 4; ++replicas) {
    SCOPED_TRACE("replicas " + std::to_string(replicas));
    expect_bitwise_equal(run_central("cnn_opset17.onnx", replicas, batches),
                         run_dp("cnn_opset17.onnx", replicas, batches));
  }
}

// BatchNorm running statistics follow replica 0's in both; Adam's state lives in the storage only.
TEST(CentralStorage, EqualsDataParallelWithBatchNormAndAdam) {
  const Batches batches = batches_of("synthetic:3,32,32:10:96", 10, 3);
  TrainerOptions adam = momentum_sgd();
  adam.optimizer = {.kind = OptimizerKind::adam};
  adam.schedule.base_lr = 1e-3;
  expect_bitwise_equal(run_central("resnet_opset17.onnx", 3, batches, adam),
                       run_dp("resnet_opset17.onnx", 3, batches, adam));
}

// Mixed precision: in bf16, and in fp16 with the storage's loss scaler taken by every replica (growing
// every 2 steps here), central storage equals DataParallelTrainer bit for bit.
TEST(CentralStorage, HalfPrecisionEqualsDataParallelBitForBit) {
  const Batches batches = batches_of("synthetic:1,28,28:10:256", 18, 4);
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    SCOPED_TRACE(precision_name(p));
    TrainerOptions o = momentum_sgd();
    o.precision = p;
    o.loss_scaler = {.init_scale = 1024, .growth_interval = 2};
    expect_bitwise_equal(run_central("cnn_opset17.onnx", 2, batches, o), run_dp("cnn_opset17.onnx", 2, batches, o));
  }
}

// An fp16 step whose summed gradient overflows is skipped at the storage: weights unchanged, the scale
// backed off, and the mini-batch still counted.
TEST(CentralStorage, Fp16SkipsAnOverflowingStep) {
  TrainerOptions o = momentum_sgd();
  o.precision = Precision::fp16;
  o.loss_scaler = {.init_scale = std::ldexp(1.0, 120), .growth_interval = 2};  // overflows float16 at once
  ImportedModel m = import_model(kModels + "cnn_opset17.onnx");
  CentralStorageTrainer cs(m.graph, {.trainer = o, .replicas = 2});
  const std::map<std::string, Tensor> before = owned(cs.trained_initializers());
  const Batches batches = batches_of("synthetic:1,28,28:10:256", 8, 2);
  size_t i = 0;
  std::vector<int64_t> indices;
  const std::vector<float> losses = cs.train(
      2, [&] { return batches[i++]; }, [&](int64_t mini_batch, float) { indices.push_back(mini_batch); });
  EXPECT_TRUE(std::isfinite(losses[0])) << "the reported loss is the unscaled one";
  EXPECT_EQ(indices, (std::vector<int64_t>{0, 1})) << "skipped steps used their mini-batches too";
  EXPECT_EQ(cs.step(), 0);
  EXPECT_EQ(cs.mini_batches_used(), 2);
  EXPECT_EQ(cs.loss_scaler()->scale(), std::ldexp(1.0, 118));
  for (const auto& [name, t] : cs.trained_initializers())
    EXPECT_EQ(std::memcmp(t.raw(), before.at(name).raw(), t.nbytes()), 0) << name << " changed on a skipped step";
  EXPECT_TRUE(std::isfinite(cs.evaluate(batches[0].first, batches[0].second, 4).loss)) << "replica 0 takes the scale";
}

TEST(CentralStorage, EqualsOneDeviceOnTheWholeBatch) {
  const Batches batches = batches_of("synthetic:1,28,28:10:256", 16, 4);
  ImportedModel m = import_model(kModels + "cnn_opset17.onnx");
  Trainer single(m.graph, momentum_sgd());
  std::vector<float> single_losses;
  for (const auto& [x, y] : batches) single_losses.push_back(single.train_step(x, y));
  for (int replicas : {2, 3}) {
    SCOPED_TRACE("replicas " + std::to_string(replicas));
    const TrainedRun cs = run_central("cnn_opset17.onnx", replicas, batches);
    for (size_t i = 0; i < cs.losses.size(); ++i)
      EXPECT_NEAR(cs.losses[i], single_losses[i], 1e-5 * std::abs(single_losses[i]));
    for (const auto& [name, t] : single.trained_initializers()) {
      const testing_support::Deviation d =
          testing_support::deviation(t.data<float>(), cs.weights.at(name).data<float>());
      EXPECT_LE(d.worst, 1e-5 * d.scale) << name;
    }
  }
}

// The storage's evaluation sees the master weights, and the report counts the traffic of R replicas.
TEST(CentralStorage, EvaluatesTheMasterAndReportsTheTraffic) {
  const Batches batches = batches_of("synthetic:1,28,28:10:256", 16, 3);
  ImportedModel m = import_model(kModels + "mlp_opset17.onnx");
  CentralStorageTrainer cs(m.graph, {.trainer = momentum_sgd(), .replicas = 2});
  size_t i = 0;
  cs.train(3, [&] { return batches[i++]; });
  Trainer reference(m.graph, momentum_sgd());
  reference.restore(owned(cs.trained_initializers()), {{"global_step", Tensor::scalar_int64(3)}});
  const Trainer::Evaluation a = cs.evaluate(batches[0].first, batches[0].second, 8);
  const Trainer::Evaluation b = reference.evaluate(batches[0].first, batches[0].second, 8);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.accuracy, b.accuracy);

  const CentralStorageReport r = cs.report();
  int64_t parameter_bytes = 0;
  for (const auto& [name, t] : cs.trained_initializers()) parameter_bytes += static_cast<int64_t>(t.nbytes());
  EXPECT_EQ(r.replicas, 2);
  EXPECT_EQ(r.steps, 3);
  EXPECT_EQ(r.parameter_bytes + r.state_bytes, parameter_bytes);
  EXPECT_EQ(r.state_bytes, 0);                            // the MLP has no BatchNorm
  EXPECT_EQ(r.optimizer_state_bytes, r.parameter_bytes);  // one momentum buffer per parameter, held once
  EXPECT_EQ(r.gradient_bytes_in_per_step(), 2 * r.parameter_bytes);
  EXPECT_EQ(r.weight_bytes_out_per_step(), 2 * r.parameter_bytes);
  EXPECT_NE(format_central_storage_report(r).find("gradients in"), std::string::npos);
  // Each replica's busy time lies within the steps' wall time.
  ASSERT_EQ(r.replica_compute_seconds.size(), 2u);
  for (double busy : r.replica_compute_seconds) {
    EXPECT_GT(busy, 0);
    EXPECT_LE(busy, r.step_seconds);
  }
}

TEST(CentralStorage, RefusesTooFewRowsAndNoReplicas) {
  ImportedModel m = import_model(kModels + "mlp_opset17.onnx");
  EXPECT_THROW(CentralStorageTrainer(m.graph, {.trainer = momentum_sgd(), .replicas = 0}), Error);
  CentralStorageTrainer cs(m.graph, {.trainer = momentum_sgd(), .replicas = 4});
  const Batches batches = batches_of("synthetic:1,28,28:10:64", 3, 1);
  try {
    cs.train_step(batches[0].first, batches[0].second);
    FAIL() << "3 rows were split over 4 replicas";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("4 replicas"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace onnxtrain
