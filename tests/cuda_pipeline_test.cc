// Pipeline stages on GPUs in one process (StageConfig::device on CUDA): the values a stage keeps for its
// backward pass and the activations and gradients it hands to its neighbours stay in device memory
// (executor/pipeline/stage_transport.h), and a session reads device inputs in place or by a peer copy.
// Without a GPU: the transports' plumbing (a device value is a shared handle; a transport refuses, as a
// broken invariant, the kind of value it does not carry) and the errors a user gets. With one GPU: a session's device
// inputs give its host inputs' outputs, and two stages sharing cuda:0 follow the CPU pipeline for every strategy,
// threaded and emulated; with two GPUs, stages on cuda:0 and cuda:1 (peer copies) do too.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <thread>

#include "executor/comm/local_comm.h"
#include "executor/inference_session.h"
#include "executor/pipeline/pipeline_trainer.h"
#include "executor/pipeline/stage_transport.h"
#include "frontend/importer.h"
#include "graph/error.h"
#include "kernels/cuda/cuda_runtime.h"
#include "kernels/cuda/device_query.h"
#include "tests/replica_fixtures.h"

namespace onnxtrain {
namespace {

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";

// A device value that needs no GPU: no bytes, so no buffer.
std::shared_ptr<const DeviceTensor> empty_device_value() {
  return std::make_shared<const DeviceTensor>(DeviceTensor{.buffer = {}, .dtype = DType::Float32, .sizes = {0, 4}});
}

Tensor host_value(float v) {
  Tensor t(DType::Float32, {2});
  t.data<float>()[0] = v;
  t.data<float>()[1] = -v;
  return t;
}

TEST(StageTransport, MailboxHandsEachValueOverOnce) {
  std::map<MessageKey, StageValue> messages;
  Mailbox zero(0, messages), one(1, messages);
  const CommTag tag{.micro_batch = 3, .kind = CommTag::activation, .index = 1};
  StageValue out;
  EXPECT_FALSE(one.try_recv(0, tag, "a", out)) << "nothing sent yet";
  const auto device = empty_device_value();
  zero.send(1, tag, {.host = {}, .device = device}, "a");
  EXPECT_THROW(zero.send(1, tag, {.host = host_value(1), .device = nullptr}, "a"), std::logic_error) << "sent twice";
  EXPECT_FALSE(one.try_recv(0, CommTag{.micro_batch = 4}, "b", out)) << "another micro-batch";
  ASSERT_TRUE(one.try_recv(0, tag, "a", out));
  EXPECT_EQ(out.device, device) << "the same buffer, not a copy";
  EXPECT_FALSE(one.try_recv(0, tag, "a", out)) << "taken once";
}

TEST(StageTransport, CommTransportCarriesTheKindOfValueItWasMadeFor) {
  auto group = make_local_group(2, std::chrono::seconds(10));
  DeviceHandoff handoff;
  const CommTag tag{.micro_batch = 0, .kind = CommTag::gradient, .index = 0};

  CommTransport host_zero(*group[0]), host_one(*group[1]);
  host_zero.send(1, tag, {.host = host_value(2), .device = nullptr}, "g");
  StageValue out;
  ASSERT_TRUE(host_one.try_recv(0, tag, "g", out));
  ASSERT_FALSE(out.on_device());
  EXPECT_EQ(out.host.data<float>()[1], -2.0f);
  EXPECT_THROW(host_zero.send(1, tag, {.host = {}, .device = empty_device_value()}, "g"), std::logic_error);

  CommTransport device_zero(*group[0], &handoff), device_one(*group[1], &handoff);
  const auto device = empty_device_value();
  std::thread sender([&] { device_zero.send(1, tag, {.host = {}, .device = device}, "g"); });
  ASSERT_TRUE(device_one.try_recv(0, tag, "g", out));
  sender.join();
  ASSERT_TRUE(out.on_device());
  EXPECT_EQ(out.device, device) << "handed over by reference, within the process";
  EXPECT_EQ(out.nbytes(), 0);
  EXPECT_THROW(device_zero.send(1, tag, {.host = host_value(3), .device = nullptr}, "g"), std::logic_error);
}

TEST(StageTransport, AMarkerWithoutItsDeviceValueIsAnError) {
  DeviceHandoff handoff;
  const MessageKey key = message_key(0, 1, CommTag{.micro_batch = 7});
  try {
    handoff.take(key, "stage 0, mini-batch 7, activation 'x'");
    ADD_FAILURE() << "took a value never put";
  } catch (const std::logic_error& e) {  // a broken invariant of the pipeline, not a user error
    EXPECT_NE(std::string(e.what()).find("activation 'x' arrived without its device value"), std::string::npos)
        << e.what();
  }
  handoff.put(key, empty_device_value(), "v");
  EXPECT_THROW(handoff.put(key, empty_device_value(), "v"), std::logic_error) << "sent twice";
  EXPECT_NE(handoff.take(key, "v"), nullptr);
}

TEST(CudaPipeline, StageDevicesNeedACudaPipeline) {
  ImportedModel model = import_model(kModels + "mlp_opset17.onnx");
  PipelineOptions o;
  o.trainer.loss = parse_loss_spec("cross-entropy");
  o.stages = 2;
  o.stage_devices = {Device::cuda(0), Device::cuda(0)};
  try {
    PipelineTrainer p(model.graph, o);
    ADD_FAILURE() << "stage_devices accepted for a CPU pipeline";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stage_devices"), std::string::npos) << e.what();
  }
}

// --- on GPUs ---

using testing_support::Batches;
using testing_support::batches_of;

std::vector<float> train_losses(const PipelineOptions& o, const Batches& batches) {
  ImportedModel model = import_model(kModels + "cnn_opset17.onnx");
  PipelineTrainer p(model.graph, o);
  return p.train(batches);
}

TEST(CudaPipeline, SessionReadsDeviceInputsInPlace) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  ImportedModel model = import_model(kModels + "cnn_opset17.onnx");
  InferenceSession session(model.graph, "", Device::cuda(0));
  const std::string input = model.graph.value(model.graph.inputs[0]).name;
  const Tensor x = batches_of("synthetic:1,28,28:10:8", 4, 1)[0].first;
  const std::map<std::string, Tensor> from_host = session.run({{input, x}});

  const cuda::DeviceStream& stream = session.device_initializers()->stream();
  DeviceTensor on_device{.buffer = cuda::DeviceBuffer(stream, x.nbytes()), .dtype = x.dtype(), .sizes = x.sizes()};
  cuda::copy_to_device(on_device.buffer.data(), x.raw(), x.nbytes(), stream);
  std::map<std::string, DeviceTensor> kept;
  const std::map<std::string, Tensor> from_device = session.run({}, {{input, &on_device}}, {}, kept);
  ASSERT_EQ(from_device.size(), from_host.size());
  for (const auto& [name, t] : from_host) {
    const Tensor& d = from_device.at(name);
    ASSERT_EQ(d.nbytes(), t.nbytes()) << name;
    EXPECT_EQ(std::memcmp(d.raw(), t.raw(), t.nbytes()), 0) << name << ": the same kernels on the same data";
  }
  EXPECT_THROW(session.run({{input, x}}, {{input, &on_device}}, {}, kept), Error) << "given twice";
}

// Every strategy on `devices` (threaded, then emulated) against the same pipeline on the CPU.
void expect_gpu_pipeline_follows_the_cpu(const std::vector<Device>& devices) {
  const Batches batches = batches_of("synthetic:1,28,28:10:48", 8, 6);
  for (PipelineStrategy strategy :
       {PipelineStrategy::naive, PipelineStrategy::pipedream, PipelineStrategy::spectrain, PipelineStrategy::gpipe}) {
    SCOPED_TRACE(pipeline_strategy_name(strategy));
    PipelineOptions o;
    o.trainer = testing_support::momentum_sgd(0.05);
    o.strategy = strategy;
    o.stages = static_cast<int>(devices.size());
    o.micro_batches = strategy == PipelineStrategy::gpipe ? 2 : 1;
    const std::vector<float> cpu = train_losses(o, batches);
    o.trainer.device = devices[0];
    o.stage_devices = devices;
    const std::vector<float> gpu = train_losses(o, batches);
    o.threaded = false;
    const std::vector<float> emulated = train_losses(o, batches);
    ASSERT_EQ(gpu.size(), cpu.size());
    ASSERT_EQ(emulated.size(), cpu.size());
    for (size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_NEAR(gpu[i], cpu[i], 1e-3 * std::max(1.0f, std::abs(cpu[i]))) << "mini-batch " << i;
      EXPECT_NEAR(emulated[i], gpu[i], 1e-4 * std::max(1.0f, std::abs(gpu[i]))) << "mini-batch " << i;
    }
  }
}

// A GPU pipeline put where a CPU run was (PipelineTrainer::restore: weights and Adam's state into the
// device policies) continues as the CPU run does, for PipeDream with vertical sync (stash and history on
// the device), and its evaluation (the weights downloaded after the run) agrees with the CPU's.
TEST(CudaPipeline, RestoredGpuStagesContinueAsTheCpuAndEvaluateAlike) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  const Batches batches = batches_of("synthetic:1,28,28:10:96", 8, 9);
  const Batches head(batches.begin(), batches.begin() + 3), tail(batches.begin() + 3, batches.end());
  PipelineOptions o;
  o.trainer = testing_support::momentum_sgd(0.05);
  o.trainer.optimizer = {.kind = OptimizerKind::adam};
  o.trainer.schedule.base_lr = 1e-3;
  o.strategy = PipelineStrategy::pipedream;
  o.vertical_sync = true;
  o.stages = 2;
  ImportedModel cpu_model = import_model(kModels + "cnn_opset17.onnx");
  PipelineTrainer cpu(cpu_model.graph, o);
  cpu.train(head);
  std::map<std::string, Tensor> values = cpu.trained_initializers(), optimizer;
  for (int k = 0; k < o.stages; ++k)
    for (const auto& [name, t] : cpu.stage_state(k).second) optimizer[name] = t;
  o.trainer.device = Device::cuda(0);
  o.stage_devices = {Device::cuda(0), Device::cuda(0)};
  ImportedModel gpu_model = import_model(kModels + "cnn_opset17.onnx");
  PipelineTrainer gpu(gpu_model.graph, o);
  gpu.restore(values, optimizer, "the CPU run");
  const std::vector<float> want = cpu.train(tail), got = gpu.train(tail);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-3 * std::max(1.0f, std::abs(want[i]))) << "mini-batch " << i;
  const auto& [x, y] = batches[0];
  const Trainer::Evaluation a = cpu.evaluate(x, y, 4), b = gpu.evaluate(x, y, 4);
  EXPECT_NEAR(b.loss, a.loss, 1e-3 * std::max(1.0, std::abs(a.loss)));
  const std::map<std::string, Tensor> trained = gpu.trained_initializers();
  for (const auto& [name, t] : cpu.trained_initializers()) {
    const Tensor& g = trained.at(name);
    ASSERT_EQ(g.numel(), t.numel()) << name;
    if (t.dtype() != DType::Float32) continue;
    for (int64_t e = 0; e < t.numel(); ++e)
      ASSERT_NEAR(g.data<float>()[e], t.data<float>()[e], 1e-3 + 1e-2 * std::abs(t.data<float>()[e]))
          << name << " " << e;
  }
}

TEST(CudaPipeline, TwoStagesSharingAGpuFollowTheCpu) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  expect_gpu_pipeline_follows_the_cpu({Device::cuda(0), Device::cuda(0)});
}

TEST(CudaPipeline, StagesOnTwoGpusFollowTheCpu) {
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices, " << cuda::device_count() << " visible";
  expect_gpu_pipeline_follows_the_cpu({Device::cuda(0), Device::cuda(1)});
}

// Four mini-batches through a policy: forward and backward passes (spectrain one step ahead, pipedream
// stashing by mini-batch, vertical sync reading the current version), then the update (gpipe: two
// micro-batch gradients, weighted, and the flush). `gradient` points at 5 floats in the policy's memory.
// After each forward: the working weights as the host Tensor holds them once `sync` ran.
std::vector<std::vector<float>> drive_policy(WeightPolicy& policy, PipelineStrategy strategy, const float* gradient,
                                             const std::function<void()>& sync, const Tensor& working) {
  std::vector<std::vector<float>> seen;
  const std::vector<const float*> grads = {gradient};
  for (int64_t i = 0; i < 4; ++i) {
    const WeightPolicy::Pass pass{.mini_batch = i, .s = 1, .sync_version = policy.version(), .stash_key = i};
    policy.before_forward(pass);
    sync();
    seen.emplace_back(working.data<float>().begin(), working.data<float>().end());
    policy.before_backward(pass);
    if (strategy == PipelineStrategy::gpipe) {
      policy.accumulate(grads, 0.75f);
      policy.accumulate(grads, 1.25f);
      policy.flush(0.5f);
    } else {
      policy.step(grads);
    }
  }
  seen.push_back(policy.master());
  return seen;
}

// A stage's weight policy with its arrays on cuda:0 (WeightMemory over the stage's store) makes the host
// policy's every update, stash, version switch, prediction and gpipe flush bit for bit: the same passes
// and gradients give the same working weights and the same W, for every strategy, with AdamW (amsgrad)
// and SGD with momentum (SpecTrain's two kinds of direction).
TEST(CudaPipeline, WeightPolicyOnTheDeviceEqualsTheHostPolicy) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  const std::vector<float> initial = {0.5f, -1.0f, 2.0f, 0.25f, -0.125f};
  const std::vector<float> g = {0.3f, -2.0f, 0.01f, 1.0f, -0.7f};
  struct Case {
    PipelineStrategy strategy;
    bool vertical_sync;
  };
  for (const Case c : {Case{PipelineStrategy::naive, false}, Case{PipelineStrategy::pipedream, false},
                       Case{PipelineStrategy::pipedream, true}, Case{PipelineStrategy::spectrain, false},
                       Case{PipelineStrategy::gpipe, false}}) {
    SCOPED_TRACE(std::string(pipeline_strategy_name(c.strategy)) + (c.vertical_sync ? " vertical sync" : ""));
    auto make = [&] {
      Tensor t(DType::Float32, {5});
      std::copy(initial.begin(), initial.end(), t.data<float>().begin());
      return t;
    };
    for (const Optimizer& optimizer : {Optimizer({.kind = OptimizerKind::adamw, .amsgrad = true}, {.base_lr = 0.01}),
                                       Optimizer({.momentum = 0.9}, {.base_lr = 0.01})}) {
      SCOPED_TRACE(optimizer.config().kind == OptimizerKind::adamw ? "adamw amsgrad" : "sgd momentum");
      Tensor on_host = make(), on_device = make();
      WeightPolicy host(c.strategy, c.vertical_sync, {{"w", on_host}}, optimizer);
      auto store = std::make_shared<DeviceInitializerStore>(0);
      WeightPolicy device(c.strategy, c.vertical_sync, {{"w", on_device}}, optimizer, true, WeightMemory(store));
      ASSERT_TRUE(device.on_device());
      cuda::DeviceBuffer g_device(store->stream(), g.size() * sizeof(float));
      cuda::copy_to_device(g_device.data(), g.data(), g.size() * sizeof(float), store->stream());
      const auto want = drive_policy(
          host, c.strategy, g.data(), [] {}, on_host);
      const auto got = drive_policy(
          device, c.strategy, static_cast<const float*>(g_device.data()), [&] { store->sync_to_host(); }, on_device);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(float)), 0) << "record " << i;
      EXPECT_NE(want.back(), initial) << "the weights were updated";
      EXPECT_EQ(device.statistics().predictions, host.statistics().predictions);
      EXPECT_EQ(device.optimizer().state_tensors().size(), host.optimizer().state_tensors().size());
    }
  }
}

}  // namespace
}  // namespace onnxtrain
