// executor/data_parallel: R replicas on R threads with an all-reduce equal one replica on the whole
// mini-batch; one replica equals the one-device Trainer bit for bit; the replicas' weights and BatchNorm
// statistics stay identical; runs are deterministic.
#include "executor/data_parallel.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "executor/comm/local_comm.h"
#include "executor/replica_memory.h"
#include "frontend/data_loader.h"
#include "frontend/dataset.h"
#include "frontend/importer.h"
#include "tests/child_process.h"
#include "tests/replica_fixtures.h"

namespace onnxtrain {
namespace {

using testing_support::batches_of;
using testing_support::momentum_sgd;

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";

std::map<std::string, Tensor> run_dp(const std::string& model, int replicas,
                                     const std::vector<std::pair<Tensor, Tensor>>& batches,
                                     std::vector<float>* losses = nullptr, int64_t bucket_bytes = 0) {
  ImportedModel m = import_model(kModels + model);
  DataParallelTrainer dp(m.graph, {.trainer = momentum_sgd(), .replicas = replicas, .bucket_bytes = bucket_bytes});
  if (bucket_bytes > 0) {
    EXPECT_GT(dp.timing().buckets, 2) << "the test wants several buckets";
  }
  size_t i = 0;
  std::vector<float> l = dp.train(static_cast<int64_t>(batches.size()), [&] { return batches[i++]; });
  if (losses) *losses = l;
  // Each replica's busy (forward, backward) and exchange time lie within the steps' wall time.
  const DataParallelTrainer::Timing& timing = dp.timing();
  EXPECT_EQ(timing.compute_seconds.size(), static_cast<size_t>(replicas));
  for (size_t r = 0; r < timing.compute_seconds.size(); ++r) {
    EXPECT_GT(timing.compute_seconds[r], 0) << "replica " << r;
    EXPECT_GE(timing.exchange_seconds[r], 0) << "replica " << r;
    EXPECT_LE(timing.compute_seconds[r] + timing.exchange_seconds[r], timing.step_seconds + 1e-3) << "replica " << r;
  }
  // Every replica holds the same weights and statistics, bit for bit.
  const std::map<std::string, Tensor> first = dp.trained_initializers();
  for (int r = 1; r < dp.replicas(); ++r) {
    for (const auto& [name, t] : dp.replica(r).trained_initializers()) {
      EXPECT_EQ(std::memcmp(t.raw(), first.at(name).raw(), t.nbytes()), 0) << "replica " << r << ": " << name;
    }
  }
  return first;
}

std::map<std::string, Tensor> run_single(const std::string& model,
                                         const std::vector<std::pair<Tensor, Tensor>>& batches,
                                         std::vector<float>* losses) {
  ImportedModel m = import_model(kModels + model);
  Trainer t(m.graph, momentum_sgd());
  for (const auto& [x, y] : batches) losses->push_back(t.train_step(x, y));
  std::map<std::string, Tensor> out;
  for (const auto& [name, v] : t.trained_initializers()) out[name] = v.clone();
  return out;
}

TEST(DataParallel, OneReplicaIsTheTrainerBitForBit) {
  const auto batches = batches_of("synthetic:1,28,28:10:256", 16, 5);
  std::vector<float> single_losses, dp_losses;
  const auto single = run_single("cnn_opset17.onnx", batches, &single_losses);
  const auto dp = run_dp("cnn_opset17.onnx", 1, batches, &dp_losses);
  EXPECT_EQ(dp_losses, single_losses);
  for (const auto& [name, t] : single) EXPECT_EQ(std::memcmp(t.raw(), dp.at(name).raw(), t.nbytes()), 0) << name;
}

// R replicas × B/R rows = one replica × B rows (mean loss: the all-reduce weights each replica's
// gradient by its rows), up to summation order; also with B not a multiple of R.
TEST(DataParallel, ReplicasEqualOneDeviceOnTheWholeBatch) {
  for (const char* model : {"mlp_opset17.onnx", "cnn_opset17.onnx"}) {
    for (int64_t batch : {16, 18}) {
      const auto batches = batches_of("synthetic:1,28,28:10:256", batch, 5);
      std::vector<float> single_losses;
      const auto single = run_single(model, batches, &single_losses);
      for (int replicas : {2, 3, 4}) {
        SCOPED_TRACE(std::string(model) + " batch " + std::to_string(batch) + " replicas " + std::to_string(replicas));
        std::vector<float> losses;
        const auto dp = run_dp(model, replicas, batches, &losses);
        for (size_t i = 0; i < losses.size(); ++i)
          EXPECT_NEAR(losses[i], single_losses[i], 1e-5 * std::abs(single_losses[i]));
        for (const auto& [name, t] : single) {
          const testing_support::Deviation d = testing_support::deviation(t.data<float>(), dp.at(name).data<float>());
          EXPECT_LE(d.worst, 1e-5 * d.scale) << name;
        }
      }
    }
  }
}

// With Dropout on (the transformer's 7 nodes), each replica draws its slice's rows of the whole batch's
// masks (run index = the step, counters offset by the slice's first row): R replicas take the one-device
// steps, up to the summation order. Another seed moves the loss by far more, so wrong masks would show.
TEST(DataParallel, ReplicasDrawTheWholeBatchsDropoutMasks) {
  const auto batches = testing_support::token_batches(12, 4, 21);
  TrainerOptions options = momentum_sgd();
  options.seed = 3;
  ImportedModel m = import_model(kModels + "transformer_opset17.onnx");
  std::vector<float> single_losses;
  Trainer single(m.graph, options);
  for (const auto& [x, y] : batches) single_losses.push_back(single.train_step(x, y));
  for (int replicas : {2, 3}) {
    ImportedModel fresh = import_model(kModels + "transformer_opset17.onnx");  // `single` trained m's weights
    DataParallelTrainer dp(fresh.graph, {.trainer = options, .replicas = replicas});
    size_t i = 0;
    const std::vector<float> losses = dp.train(static_cast<int64_t>(batches.size()), [&] { return batches[i++]; });
    for (size_t s = 0; s < losses.size(); ++s)
      EXPECT_NEAR(losses[s], single_losses[s], 1e-5 * std::abs(single_losses[s]))
          << replicas << " replicas, step " << s;
    const std::map<std::string, Tensor> trained = dp.trained_initializers();
    for (const auto& [name, t] : single.trained_initializers()) {
      const testing_support::Deviation d = testing_support::deviation(t.data<float>(), trained.at(name).data<float>());
      EXPECT_LE(d.worst, 1e-5 * d.scale) << replicas << " replicas: " << name;
    }
  }
  options.seed = 4;
  ImportedModel again = import_model(kModels + "transformer_opset17.onnx");
  Trainer other(again.graph, options);
  EXPECT_GT(std::abs(other.train_step(batches[0].first, batches[0].second) - single_losses[0]), 1e-4);
}

TEST(DataParallel, RunsAreDeterministicAndBatchNormStatisticsStayIdentical) {
  const auto batches = batches_of("synthetic:3,32,32:10:96", 8, 3);
  std::vector<float> a_losses, b_losses;
  const auto a = run_dp("resnet_opset17.onnx", 2, batches, &a_losses);  // checks the replicas agree
  const auto b = run_dp("resnet_opset17.onnx", 2, batches, &b_losses);
  EXPECT_EQ(a_losses, b_losses);
  for (const auto& [name, t] : a) EXPECT_EQ(std::memcmp(t.raw(), b.at(name).raw(), t.nbytes()), 0) << name;
}

// One replica per process with a world communicator (the `mpirun` layout), here with threads standing in
// for the processes: the same weights and losses, bit for bit, as R replica threads in one trainer; the
// weights start from rank 0's even when another rank's differ.
TEST(DataParallel, OneReplicaPerProcessEqualsReplicaThreadsBitForBit) {
  const auto batches = batches_of("synthetic:3,32,32:10:96", 10, 3);
  const int r = 3;
  omp_set_num_threads(1);  // every replica then runs one OpenMP thread, as in the threaded trainer below
  std::vector<float> threaded_losses;
  const auto threaded = run_dp("resnet_opset17.onnx", r, batches, &threaded_losses);
  auto group = make_local_group(r, std::chrono::seconds(60));
  std::vector<std::map<std::string, Tensor>> weights(r);
  std::vector<std::vector<float>> losses(r);
  std::vector<std::thread> ranks;
  for (int k = 0; k < r; ++k) {
    ranks.emplace_back([&, k] {
      omp_set_num_threads(1);
      ImportedModel m = import_model(kModels + "resnet_opset17.onnx");
      if (k == 2) {  // a rank that read different weights: the broadcast from rank 0 replaces them
        for (ValueId id : m.graph.initializers)
          if (Tensor* t = m.graph.value(id).data ? &*m.graph.value(id).data : nullptr;
              t && t->dtype() == DType::Float32)
            for (float& v : t->data<float>()) v += 1.0f;
      }
      DataParallelTrainer dp(m.graph, {.trainer = momentum_sgd(), .world = group[k].get()});
      size_t i = 0;
      losses[k] = dp.train(static_cast<int64_t>(batches.size()), [&] { return batches[i++]; });
      for (const auto& [name, t] : dp.trained_initializers()) weights[k][name] = t.clone();
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int k = 0; k < r; ++k) {
    EXPECT_EQ(losses[k], threaded_losses) << "rank " << k;
    for (const auto& [name, t] : threaded)
      EXPECT_EQ(std::memcmp(t.raw(), weights[k].at(name).raw(), t.nbytes()), 0) << "rank " << k << ": " << name;
  }
}

// Buckets all-reduced during the backward pass sum the same elements in the same replica order as one
// all-reduce after it: the same bits, on threads and with a world communicator per replica.
TEST(DataParallel, BucketedOverlapEqualsOneAllReduceBitForBit) {
  const auto batches = batches_of("synthetic:3,32,32:10:96", 12, 3);
  omp_set_num_threads(1);
  std::vector<float> flat_losses, bucket_losses;
  const auto flat = run_dp("resnet_opset17.onnx", 3, batches, &flat_losses);
  const auto bucketed = run_dp("resnet_opset17.onnx", 3, batches, &bucket_losses, 8192);
  EXPECT_EQ(flat_losses, bucket_losses);
  for (const auto& [name, t] : flat) EXPECT_EQ(std::memcmp(t.raw(), bucketed.at(name).raw(), t.nbytes()), 0) << name;

  auto group = make_local_group(2, std::chrono::seconds(60));
  std::vector<std::map<std::string, Tensor>> weights(2);
  std::vector<std::vector<float>> losses(2);
  std::vector<std::thread> ranks;
  for (int k = 0; k < 2; ++k) {
    ranks.emplace_back([&, k] {
      omp_set_num_threads(1);
      ImportedModel m = import_model(kModels + "resnet_opset17.onnx");
      DataParallelTrainer dp(m.graph, {.trainer = momentum_sgd(), .bucket_bytes = 8192, .world = group[k].get()});
      size_t i = 0;
      losses[k] = dp.train(static_cast<int64_t>(batches.size()), [&] { return batches[i++]; });
      for (const auto& [name, t] : dp.trained_initializers()) weights[k][name] = t.clone();
    });
  }
  for (std::thread& t : ranks) t.join();
  std::vector<float> two_losses;
  const auto two = run_dp("resnet_opset17.onnx", 2, batches, &two_losses);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(losses[k], two_losses) << "rank " << k;
    for (const auto& [name, t] : two) EXPECT_EQ(std::memcmp(t.raw(), weights[k].at(name).raw(), t.nbytes()), 0) << name;
  }
}

// Replica threads step sharded (each sums its share of the gradients and updates that share of replica 0's
// weights and optimizer state, then copies it to the others): the same weights, losses and replica-0
// optimizer state, bit for bit, as every replica applying the summed gradients with its own optimizer,
// which --clip-grad-norm (here never reached) still does; and only replica 0 holds optimizer state and
// the replicas share one copy of the weights.
TEST(DataParallel, ShardedStepEqualsEveryReplicaSteppingAndKeepsOneOptimizerState) {
  const auto batches = batches_of("synthetic:3,32,32:10:96", 12, 3);
  TrainerOptions unsharded_options = momentum_sgd();
  unsharded_options.clip_grad_norm = 1e30;  // apply_gradients clips (never here): every replica steps itself
  std::vector<std::map<std::string, Tensor>> weights, states;
  std::vector<std::vector<float>> losses;
  for (const TrainerOptions& options : {momentum_sgd(), unsharded_options}) {
    ImportedModel m = import_model(kModels + "resnet_opset17.onnx");
    DataParallelTrainer dp(m.graph, {.trainer = options, .replicas = 3});
    size_t i = 0;
    losses.push_back(dp.train(static_cast<int64_t>(batches.size()), [&] { return batches[i++]; }));
    weights.emplace_back();
    for (const auto& [name, t] : dp.trained_initializers()) weights.back()[name] = t.clone();
    states.push_back(dp.replica(0).optimizer().state_tensors());
    for (int r = 1; r < 3; ++r) {
      EXPECT_EQ(dp.replica(r).step(), 3) << "replica " << r;
      for (const auto& [name, t] : dp.replica(r).trained_initializers())
        EXPECT_EQ(std::memcmp(t.raw(), weights.back().at(name).raw(), t.nbytes()), 0) << "replica " << r << " " << name;
    }
    const bool sharded = options.clip_grad_norm == 0;
    EXPECT_EQ(dp.replica(1).optimizer().states().empty(), sharded);
    // Sharded, the replicas read one copy of the weights; their BatchNorm statistics stay their own.
    const std::map<std::string, Tensor> statistics = dp.replica(0).running_statistics();
    for (const auto& [name, t] : dp.replica(2).trained_initializers()) {
      const bool shares = t.raw() == dp.trained_initializers().at(name).raw();
      EXPECT_EQ(shares, sharded && !statistics.count(name)) << name;
    }
  }
  EXPECT_EQ(losses[0], losses[1]);
  for (const auto& [name, t] : weights[1])
    EXPECT_EQ(std::memcmp(t.raw(), weights[0].at(name).raw(), t.nbytes()), 0) << name;
  ASSERT_EQ(states[0].size(), states[1].size());
  EXPECT_GT(states[0].size(), 1u);
  for (const auto& [name, t] : states[1]) {
    ASSERT_TRUE(states[0].count(name)) << name;
    EXPECT_EQ(std::memcmp(t.raw(), states[0].at(name).raw(), t.nbytes()), 0) << name;
  }
}

// The sharded step sums a convolution's weight gradient from the taps its kernel kept, without the zeros
// (Trainer::forward_backward_kept, ReplicaGradientSum::Taps), where a layer's output is one pixel: on a
// model whose last convolution is such a layer, the same weights, bit for bit, as the unsharded step on the
// dense gradients (clipping at 1e30 never clips but makes every replica step on its own).
TEST(DataParallel, ShardedStepOnKeptTapsEqualsTheDenseGradients) {
  const std::string model = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/small_planes/small_plane_cnn.onnx";
  const auto batches = batches_of("synthetic:4,4,4:10:64", 16, 3);
  const TrainerOptions sharded_options = testing_support::model_layout_weights(momentum_sgd());
  TrainerOptions unsharded_options = sharded_options;
  unsharded_options.clip_grad_norm = 1e30;
  std::vector<std::map<std::string, Tensor>> weights;
  for (const TrainerOptions& options : {sharded_options, unsharded_options}) {
    ImportedModel m = import_model(model);
    DataParallelTrainer dp(m.graph, {.trainer = options, .replicas = 2});
    size_t i = 0;
    dp.train(static_cast<int64_t>(batches.size()), [&] { return batches[i++]; });
    weights.emplace_back();
    for (const auto& [name, t] : dp.trained_initializers()) weights.back()[name] = t.clone();
  }
  EXPECT_GE(testing_support::gradients_kept_as_taps(model, batches), 1)
      << "no kernel kept a gradient's taps: the test does not reach that path";
  for (const auto& [name, t] : weights[1])
    EXPECT_EQ(std::memcmp(t.raw(), weights[0].at(name).raw(), t.nbytes()), 0) << name;
}

// The parameters a replica's recipe derives from the shared weights (a small plane's tap-major weight, a
// one-pixel output's live taps) are replica 0's too under the sharded step: one copy that every replica
// reads and the step writes, not one per replica that the step copies its updates into. The weights stay
// those of every replica stepping its own copy, bit for bit.
TEST(DataParallel, ShardedReplicasShareTheParametersTheirRecipesDerive) {
  const std::string model = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/small_planes/small_plane_cnn.onnx";
  const auto batches = batches_of("synthetic:4,4,4:10:64", 16, 3);
  TrainerOptions unsharded_options = momentum_sgd();
  unsharded_options.clip_grad_norm = 1e30;  // every replica steps its own copy
  std::vector<std::map<std::string, Tensor>> weights;
  for (const TrainerOptions& options : {momentum_sgd(), unsharded_options}) {
    ImportedModel m = import_model(model);
    DataParallelTrainer dp(m.graph, {.trainer = options, .replicas = 3});
    size_t i = 0;
    dp.train(static_cast<int64_t>(batches.size()), [&] { return batches[i++]; });
    const std::map<std::string, Tensor> first = dp.replica(0).trained_initializers();
    int tap_major = 0, live_taps = 0;
    weights.emplace_back();
    for (const auto& [name, t] : first) {
      tap_major += name.ends_with(".tap_major");
      live_taps += name.ends_with(".live_taps");
      weights.back()[name] = t.clone();
    }
    EXPECT_GE(tap_major, 1) << "no tap-major parameter: the test misses its case";
    EXPECT_GE(live_taps, 1) << "no live-tap parameter: the test misses its case";
    const bool sharded = options.clip_grad_norm == 0;
    const std::map<std::string, Tensor> statistics = dp.replica(0).running_statistics();
    for (int r = 1; r < 3; ++r) {
      for (const auto& [name, t] : dp.replica(r).trained_initializers()) {
        EXPECT_EQ(t.raw() == first.at(name).raw(), sharded && !statistics.count(name))
            << "replica " << r << " " << name;
      }
    }
  }
  for (const auto& [name, t] : weights[1])
    EXPECT_EQ(std::memcmp(t.raw(), weights[0].at(name).raw(), t.nbytes()), 0) << name;
}

TEST(DataParallel, TooFewRowsForTheReplicasIsAnError) {
  ImportedModel m = import_model(kModels + "mlp_opset17.onnx");
  DataParallelTrainer dp(m.graph, {.trainer = momentum_sgd(), .replicas = 4});
  const auto batches = batches_of("synthetic:1,28,28:10:64", 3, 1);
  try {
    dp.train_step(batches[0].first, batches[0].second);
    FAIL() << "3 rows were split over 4 replicas";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("4 replicas"), std::string::npos) << e.what();
  }
}

// --strategy dp --replicas 1000 under `ulimit -v 4000000` aborted (a replica thread that could not start).
// Now the replicas' weights, gradients, optimizer state and thread stacks are checked against the memory
// limit first: one line naming --replicas, before anything is allocated.
TEST(DataParallel, ReplicasThatCannotFitAreRefusedBeforeAnyIsBuilt) {
  ImportedModel m = import_model(kModels + "mlp_opset17.onnx");
  const ReplicaMemoryEstimate e = estimate_replica_memory(m.graph, 1000, 999, momentum_sgd());
  // mlp_opset17: 109386 float parameters; a copy, its gradients and the momentum buffers.
  EXPECT_GE(e.per_replica_bytes, 3u * 4u * 109386u);
  EXPECT_LT(e.per_replica_bytes, 3u * 4u * 109386u + 4096u);
  EXPECT_EQ(e.address_space_bytes, 1000 * e.per_replica_bytes + 999 * e.thread_stack_bytes);
  // Replicas that share the weights (the sharded step): one copy of them and of the momentum, and per
  // replica its gradients (the MLP has no BatchNorm statistics).
  const ReplicaMemoryEstimate shared = estimate_replica_memory(m.graph, 1000, 999, momentum_sgd(), true);
  EXPECT_EQ(shared.per_replica_bytes, 4u * 109386u);
  EXPECT_GE(shared.shared_bytes, 2u * 4u * 109386u);
  EXPECT_LT(shared.shared_bytes, 2u * 4u * 109386u + 4096u);
  EXPECT_EQ(shared.resident_bytes, shared.shared_bytes + 1000 * shared.per_replica_bytes);
  if (testing_support::kSanitized) GTEST_SKIP() << "sanitizer runtimes do not survive RLIMIT_AS";
  const testing_support::ChildResult r = testing_support::run_in_child([&] {
    testing_support::limit_address_space_growth(uint64_t{1} << 30);
    try {
      DataParallelTrainer dp(m.graph, {.trainer = momentum_sgd(), .replicas = 1000});
      return std::string("no error");
    } catch (const Error& error) {
      return std::string(error.what());
    }
  });
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.message.rfind("--replicas 1000: not enough memory: 1000 replicas need at least ", 0), 0u) << r.message;
  EXPECT_NE(r.message.find("(ulimit -v); use fewer replicas"), std::string::npos) << r.message;
  EXPECT_EQ(r.message.find('\n'), std::string::npos);
  // A handful fit.
  EXPECT_NO_THROW(check_replicas_fit_in_memory(m.graph, 4, 3, momentum_sgd(), "--replicas 4"));
}

}  // namespace
}  // namespace onnxtrain
