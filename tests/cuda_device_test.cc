// `--device cuda` end to end: the session and trainer on cuda:N, and the command line's checks of the
// devices a run needs. Without a GPU the tests assert the errors a user gets (which device, how many are
// visible, what to do); with one, that training on cuda:0 follows the CPU run, with the weights and the
// optimizer state device-resident: uploaded once, stepped on the device, and downloaded on demand by
// trained_initializers, checkpoints (state_tensors / restore) and seen by evaluate.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "executor/central_storage.h"
#include "executor/cuda_run_profile.h"
#include "executor/data_parallel.h"
#include "executor/inference_session.h"
#include "executor/parameter_server.h"
#include "executor/trainer.h"
#include "frontend/importer.h"
#include "frontend/npy.h"
#include "graph/error.h"
#include "kernels/cuda/cuda_runtime.h"
#include "kernels/cuda/device_query.h"
#include "tests/cli_run.h"

namespace onnxtrain {
namespace {

using testing_support::run_cli;

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";
const std::string kTrainArgs = "train " + kModels +
                               "cnn_opset17.onnx --data synthetic:1,28,28:10:256 --batch 32 "
                               "--epochs 1 --test-data none --validation 0 --seed 3";

bool gpu_visible() { return cuda::device_count() > 0; }

TEST(CudaDevice, DeviceNames) {
  EXPECT_EQ(Device::cpu().name(), "cpu");
  EXPECT_EQ(Device::cuda(3).name(), "cuda:3");
}

TEST(CudaDevice, SessionOnAMissingDeviceSaysWhichAndHowManyAreVisible) {
  ImportedModel model = import_model(kModels + "mlp_opset17.onnx");
  const int visible = cuda::device_count();
  try {
    InferenceSession session(model.graph, "", Device::cuda(visible));  // one past the last visible device
    FAIL() << "a session on cuda:" << visible << " was made with " << visible << " devices visible";
  } catch (const Error& e) {
    const std::string message = e.what();
    if (cuda::query_devices().compiled) {
      EXPECT_NE(message.find("cuda:" + std::to_string(visible)), std::string::npos) << message;
      EXPECT_NE(message.find(std::to_string(visible) + " CUDA device"), std::string::npos) << message;
    } else {
      EXPECT_NE(message.find("without CUDA support"), std::string::npos) << message;
    }
  }
}

// Where the command-line tests point -o: a file of our own (never /dev/null, which a run as root that got
// as far as writing would replace, before -o was checked).
std::string scratch_model() {
  return (std::filesystem::temp_directory_path() / ("onnxtrain_cuda_cli_" + std::to_string(::getpid()) + ".onnx"))
      .string();
}

TEST(CudaDevice, CommandLineRefusesAMalformedDevice) {
  const testing_support::CliRun r = run_cli(kTrainArgs + " --device gpu0 -o " + scratch_model());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--device gpu0: expected cpu, cuda or cuda:N"), std::string::npos) << r.output;
}

// `onnxtrain run --device cuda`: on a GPU the logits equal the stored expected ones (as on the CPU, within
// float32 tolerance) and the benchmark line names the device; without one, the error says none is visible.
TEST(CudaDevice, RunCommandOnCuda) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("onnxtrain_cuda_run_" + std::to_string(::getpid()))).string();
  const testing_support::CliRun r = run_cli("run " + kModels + "cnn_opset17.onnx --input input=" + kModels +
                                            "expected/fashion_batch3_input.npy -o " + dir + " --bench 2 --device cuda");
  if (!gpu_visible()) {
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("--device cuda: no CUDA device is visible"), std::string::npos) << r.output;
    return;
  }
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("bench: 2 runs on cuda:0"), std::string::npos) << r.output;
  const Tensor got = read_npy(dir + "/logits.npy");
  const Tensor expected = read_npy(kModels + "expected/cnn_opset17_logits.npy");
  ASSERT_EQ(got.sizes(), expected.sizes());
  const std::vector<double> a = got.to_double(), b = expected.to_double();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4 + 1e-3 * std::abs(b[i])) << "logit " << i;
  std::filesystem::remove_all(dir);
}

// ONNXTRAIN_CUDA_PROFILE: a session's node times by op type, per run, the largest first.
TEST(CudaRunProfile, ReportAveragesRunsByOpTypeLargestFirst) {
  CudaRunProfile profile("test graph");
  EXPECT_EQ(profile.report(), "");  // no run after the first: nothing to say
  const std::vector<NodeTiming> run = {{"Conv", 3.0, 0.1}, {"Relu", 0.5, 0.2}, {"Conv", 1.0, 0.1}, {"Add", 0.25, 0.4}};
  profile.add_run(run, {.wall_ms = 6, .uploads_ms = 0.5, .downloads_ms = 0.25, .between_runs_ms = -1});
  profile.add_run(
      run, {.wall_ms = 8, .uploads_ms = 0.5, .downloads_ms = 0.25, .between_runs_ms = 2, .host_between_runs_ms = 1.5});
  const std::string text = profile.report(/*top=*/2);
  EXPECT_NE(text.find("test graph, 2 runs after the first"), std::string::npos) << text;
  // Per run: Conv 2 nodes, 4 ms GPU of 4.75 (84.2%), 0.2 ms host; Relu next; Add folded into the rest.
  EXPECT_NE(text.find("Conv                             2.0      4.000      0.200   84.2"), std::string::npos) << text;
  EXPECT_LT(text.find("Conv "), text.find("Relu "));
  EXPECT_EQ(text.find("Add "), std::string::npos) << text;
  EXPECT_NE(text.find("(1 more)                         1.0      0.250      0.400    5.3"), std::string::npos) << text;
  EXPECT_NE(text.find("nodes: GPU 4.750 ms, host 0.800 ms; uploads 0.500 ms, downloads 0.250 ms; wall 7.000 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("between runs (outside this session: optimizer, host work, other sessions): GPU 2.000 ms "
                      "(max 2.000), host 1.500 ms"),
            std::string::npos)
      << text;
}

// With a GPU: `run --bench` under ONNXTRAIN_CUDA_PROFILE=1 prints the CNN's op types with their GPU times.
TEST(CudaDevice, ProfileVariableTimesEveryNodeOnTheGpu) {
  if (!gpu_visible()) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("onnxtrain_cuda_profile_" + std::to_string(::getpid()))).string();
  const testing_support::CliRun r = testing_support::run_cli_prefixed(
      "ONNXTRAIN_CUDA_PROFILE=1", "run " + kModels + "cnn_opset17.onnx --input input=" + kModels +
                                      "expected/fashion_batch3_input.npy -o " + dir + " --bench 3 --device cuda");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ONNXTRAIN_CUDA_PROFILE: session of"), std::string::npos) << r.output;
  for (const char* op : {"Conv ", "Gemm ", "Relu "}) EXPECT_NE(r.output.find(op), std::string::npos) << op << r.output;
  EXPECT_NE(r.output.find("nodes: GPU "), std::string::npos) << r.output;
  // `train`: the training session's table, its time between runs, and the host phases of the steps.
  const testing_support::CliRun t = testing_support::run_cli_prefixed(
      "ONNXTRAIN_CUDA_PROFILE=1", kTrainArgs + " --device cuda -o " + dir + "/trained.onnx");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  for (const char* part : {"ConvGrad ", "between runs (outside this session", "host phases outside the session runs",
                           "the next batch (data loader)", "trainer: optimizer step (enqueue)"})
    EXPECT_NE(t.output.find(part), std::string::npos) << part << "\n" << t.output;
  std::filesystem::remove_all(dir);
}

TEST(CudaDevice, CommandLineNamesTheDevicesAPipelineNeeds) {
  const int visible = cuda::device_count();
  const int stages = visible + 1;
  const testing_support::CliRun r = run_cli(kTrainArgs + " --device cuda --strategy naive --stages " +
                                            std::to_string(stages) + " -o " + scratch_model());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  if (visible == 0) {
    EXPECT_NE(r.output.find("no CUDA device is visible"), std::string::npos) << r.output;
  } else {
    EXPECT_NE(r.output.find("needs cuda:0..cuda:" + std::to_string(stages - 1)), std::string::npos) << r.output;
  }
}

// Central storage and the parameter server put replica (worker) r on cuda:N+r: one more than is visible
// is refused before the data is made, naming the devices.
TEST(CudaDevice, CommandLineNamesTheDevicesReplicasNeed) {
  const int visible = cuda::device_count();
  const std::string replicas = std::to_string(visible + 1);
  for (const std::string strategy : {"--central-storage --strategy dp", "--strategy ps"}) {
    const testing_support::CliRun r =
        run_cli(kTrainArgs + " --device cuda " + strategy + " --replicas " + replicas + " -o " + scratch_model());
    EXPECT_EQ(r.exit_code, 1) << r.output;
    const std::string expected =
        visible == 0 ? "no CUDA device is visible" : "needs cuda:0..cuda:" + std::to_string(visible);
    EXPECT_NE(r.output.find(expected), std::string::npos) << strategy << ": " << r.output;
  }
}

// With a GPU: ten steps on cuda:0 end within float32 rounding of the same steps on the CPU.
TEST(CudaDevice, TrainingOnCudaFollowsTheCpu) {
  if (!gpu_visible()) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  ImportedModel cpu_model = import_model(kModels + "cnn_opset17.onnx");
  ImportedModel gpu_model = import_model(kModels + "cnn_opset17.onnx");
  TrainerOptions options{.loss = parse_loss_spec("cross-entropy")};
  Trainer cpu(cpu_model.graph, options);
  options.device = Device::cuda(0);
  Trainer gpu(gpu_model.graph, options);
  Tensor x(DType::Float32, {16, 1, 28, 28});
  Tensor y(DType::Int64, {16});
  for (int step = 0; step < 10; ++step) {
    auto xs = x.data<float>();
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.37f * static_cast<float>(i + 131 * step));
    auto ys = y.data<int64_t>();
    for (size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<int64_t>((i * 7 + step) % 10);
    const double cpu_loss = cpu.train_step(x, y);
    const double gpu_loss = gpu.train_step(x, y);
    EXPECT_NEAR(gpu_loss, cpu_loss, 1e-3 * std::max(1.0, std::abs(cpu_loss))) << "step " << step;
  }
}

// --- device-resident weights (GPU only) ---

// The deterministic batch of step `step` for a model with input (B, C, H, W) and 10 classes.
std::pair<Tensor, Tensor> batch_for(int step, std::vector<int64_t> input_sizes) {
  Tensor x(DType::Float32, input_sizes);
  Tensor y(DType::Int64, {input_sizes[0]});
  auto xs = x.data<float>();
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.37f * static_cast<float>(i + 131 * step));
  auto ys = y.data<int64_t>();
  for (size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<int64_t>((i * 7 + step) % 10);
  return {x, y};
}

const std::vector<int64_t> kCnnInput{16, 1, 28, 28};

void train(Trainer& trainer, int first_step, int steps, const std::vector<int64_t>& input = kCnnInput) {
  for (int s = first_step; s < first_step + steps; ++s) {
    auto [x, y] = batch_for(s, input);
    trainer.train_step(x, y);
  }
}

std::map<std::string, Tensor> cloned(const std::map<std::string, Tensor>& tensors) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : tensors) out[name] = t.clone();
  return out;
}

// ‖a − b‖ / ‖b − start‖ over every float tensor: how far `a` is from `b`, relative to how far training
// moved `b` (so that a trainer that never moved cannot pass by staying at the start).
double relative_gap(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b,
                    const std::map<std::string, Tensor>& start) {
  double gap = 0, moved = 0;
  for (const auto& [name, tb] : b) {
    if (tb.dtype() != DType::Float32) continue;
    auto va = a.at(name).data<float>(), vb = tb.data<float>(), v0 = start.at(name).data<float>();
    for (size_t i = 0; i < vb.size(); ++i) {
      gap += (static_cast<double>(va[i]) - vb[i]) * (static_cast<double>(va[i]) - vb[i]);
      moved += (static_cast<double>(vb[i]) - v0[i]) * (static_cast<double>(vb[i]) - v0[i]);
    }
  }
  EXPECT_GT(moved, 0.0) << "training did not move the weights";
  return std::sqrt(gap / moved);
}

bool same_bits(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.nbytes() != t.nbytes() || std::memcmp(it->second.raw(), t.raw(), t.nbytes()) != 0)
      return false;
  }
  return true;
}

TrainerOptions options_for(const std::string& optimizer, Device device) {
  TrainerOptions options{.loss = parse_loss_spec("cross-entropy"), .schedule = {.base_lr = 0.01}, .device = device};
  apply_optimizer_name(optimizer, options.optimizer);
  if (optimizer == "adam") options.schedule.base_lr = 1e-3;
  return options;
}

// Weights and optimizer state after several steps on cuda:0 (stepped by the device optimizer) follow the
// CPU trainer's: the device update is the host functor, so only the forward/backward rounding differs.
void expect_weights_follow_the_cpu(const std::string& optimizer) {
  ImportedModel cpu_model = import_model(kModels + "cnn_opset17.onnx");
  ImportedModel gpu_model = import_model(kModels + "cnn_opset17.onnx");
  Trainer cpu(cpu_model.graph, options_for(optimizer, Device::cpu()));
  Trainer gpu(gpu_model.graph, options_for(optimizer, Device::cuda(0)));
  const std::map<std::string, Tensor> start = cloned(cpu.trained_initializers());
  train(cpu, 0, 8);
  train(gpu, 0, 8);
  EXPECT_EQ(gpu.step(), 8);
  EXPECT_LT(relative_gap(gpu.trained_initializers(), cpu.trained_initializers(), start), 1e-2) << optimizer;
  // The optimizer state came back from the device too, with the host's step counts.
  const std::map<std::string, Tensor> cpu_state = cpu.optimizer().state_tensors();
  const std::map<std::string, Tensor> gpu_state = gpu.optimizer().state_tensors();
  ASSERT_EQ(gpu_state.size(), cpu_state.size()) << optimizer;
  for (const auto& [key, t] : cpu_state) {
    ASSERT_TRUE(gpu_state.contains(key)) << key;
    if (t.dtype() != DType::Float32) {
      EXPECT_EQ(gpu_state.at(key).to_int64(), t.to_int64()) << key;
      continue;
    }
    auto c = t.data<float>(), g = gpu_state.at(key).data<float>();
    ASSERT_EQ(c.size(), g.size()) << key;
    double gap = 0, norm = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      gap += (static_cast<double>(g[i]) - c[i]) * (static_cast<double>(g[i]) - c[i]);
      norm += static_cast<double>(c[i]) * c[i];
    }
    EXPECT_GT(norm, 0.0) << key << " stayed zero";
    EXPECT_LT(std::sqrt(gap / std::max(norm, 1e-30)), 2e-2) << key;
  }
}

TEST(CudaDevice, MomentumWeightsOnCudaFollowTheCpu) {
  if (!gpu_visible()) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  expect_weights_follow_the_cpu("momentum");
}

TEST(CudaDevice, AdamWeightsOnCudaFollowTheCpu) {
  if (!gpu_visible()) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  expect_weights_follow_the_cpu("adam");
}

// A session uploads its initializers once, not once per run; initializers_changed() uploads them again;
// outputs kept on the device hold what a download would have returned.
TEST(CudaDevice, SessionKeepsInitializersOnTheDevice) {
  if (!gpu_visible()) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  ImportedModel model = import_model(kModels + "cnn_opset17.onnx");
  InferenceSession gpu(model.graph, "", Device::cuda(0));
  const uint64_t initializers = model.graph.initializers.size();
  ASSERT_GT(initializers, 0u);
  const std::string input = model.graph.value(model.graph.inputs[0]).name;
  const std::string output = model.graph.value(model.graph.outputs[0]).name;
  const std::map<std::string, Tensor> feed{{input, batch_for(0, kCnnInput).first}};
  const std::map<std::string, Tensor> first = gpu.run(feed);
  gpu.run(feed);
  gpu.run(feed);
  EXPECT_EQ(gpu.device_initializers()->uploads(), initializers);
  gpu.initializers_changed();
  gpu.run(feed);
  EXPECT_EQ(gpu.device_initializers()->uploads(), 2 * initializers);

  std::map<std::string, DeviceTensor> kept;
  const std::map<std::string, Tensor> host = gpu.run(feed, {output}, kept);
  EXPECT_FALSE(host.contains(output));
  ASSERT_TRUE(kept.contains(output));
  const Tensor& expected = first.at(output);
  ASSERT_EQ(kept.at(output).sizes, expected.sizes());
  Tensor downloaded(kept.at(output).dtype, kept.at(output).sizes);
  cuda::copy_to_host(downloaded.raw(), kept.at(output).buffer.data(), downloaded.nbytes(),
                     gpu.device_initializers()->stream());
  gpu.device_initializers()->stream().synchronize();
  EXPECT_EQ(std::memcmp(downloaded.raw(), expected.raw(), expected.nbytes()), 0);
}

// trained_initializers downloads what the device holds now (not the host copies of an earlier step), and
// evaluate reads the trained device weights: the same evaluation as a CPU trainer given those weights.
TEST(CudaDevice, TrainedInitializersAndEvaluateSeeTheDeviceWeights) {
  if (!gpu_visible()) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  ImportedModel gpu_model = import_model(kModels + "cnn_opset17.onnx");
  ImportedModel cpu_model = import_model(kModels + "cnn_opset17.onnx");
  Trainer gpu(gpu_model.graph, options_for("momentum", Device::cuda(0)));
  Trainer cpu(cpu_model.graph, options_for("momentum", Device::cpu()));
  auto [val_x, val_y] = batch_for(100, {64, 1, 28, 28});
  const Trainer::Evaluation before = gpu.evaluate(val_x, val_y, 32);
  train(gpu, 0, 3);
  const std::map<std::string, Tensor> after3 = cloned(gpu.trained_initializers());
  train(gpu, 3, 2);
  const std::map<std::string, Tensor> after5 = cloned(gpu.trained_initializers());
  EXPECT_FALSE(same_bits(after3, after5)) << "trained_initializers returned stale host copies";

  const Trainer::Evaluation trained = gpu.evaluate(val_x, val_y, 32);
  EXPECT_NE(trained.loss, before.loss) << "evaluate did not see the trained weights";
  cpu.restore(after5, {{"global_step", Tensor::scalar_int64(5)}});
  const Trainer::Evaluation on_cpu = cpu.evaluate(val_x, val_y, 32);
  EXPECT_NEAR(trained.loss, on_cpu.loss, 1e-3 * std::max(1.0, std::abs(on_cpu.loss)));
  EXPECT_NEAR(trained.accuracy, on_cpu.accuracy, 1.0 / 64 + 1e-9);
}

// A checkpoint taken on cuda:0 (weights and optimizer state downloaded) restored into a fresh cuda
// trainer continues exactly as the uninterrupted run: the restored state reaches the device.
TEST(CudaDevice, CheckpointRoundTripOnCuda) {
  if (!gpu_visible()) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  for (const std::string optimizer : {"momentum", "adam"}) {
    SCOPED_TRACE(optimizer);
    ImportedModel model_a = import_model(kModels + "cnn_opset17.onnx");
    ImportedModel model_b = import_model(kModels + "cnn_opset17.onnx");
    Trainer a(model_a.graph, options_for(optimizer, Device::cuda(0)));
    Trainer b(model_b.graph, options_for(optimizer, Device::cuda(0)));
    const std::map<std::string, Tensor> start = cloned(a.trained_initializers());
    train(a, 0, 3);
    const std::map<std::string, Tensor> weights = cloned(a.trained_initializers());
    const std::map<std::string, Tensor> state = a.optimizer().state_tensors();
    EXPECT_EQ(state.at("global_step").to_int64()[0], 3);
    train(a, 3, 2);
    b.restore(weights, state);
    EXPECT_EQ(b.step(), 3);
    EXPECT_TRUE(same_bits(cloned(b.trained_initializers()), weights));
    train(b, 3, 2);
    // The same device and kernels: equal up to nondeterministic reductions (cuDNN's backward atomics).
    EXPECT_LT(relative_gap(b.trained_initializers(), a.trained_initializers(), start), 1e-4);
    // A restored state that was not uploaded would restart the momentum: far above this bound.
  }
}

// Data parallelism's halves on the device: host gradients applied with apply_gradients step the device
// weights as train_step does.
TEST(CudaDevice, ApplyGradientsStepsTheDeviceWeights) {
  if (!gpu_visible()) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  ImportedModel model_a = import_model(kModels + "cnn_opset17.onnx");
  ImportedModel model_b = import_model(kModels + "cnn_opset17.onnx");
  Trainer a(model_a.graph, options_for("adam", Device::cuda(0)));
  Trainer b(model_b.graph, options_for("adam", Device::cuda(0)));
  const std::map<std::string, Tensor> start = cloned(a.trained_initializers());
  for (int s = 0; s < 3; ++s) {
    auto [x, y] = batch_for(s, kCnnInput);
    a.train_step(x, y);
    b.apply_gradients(b.compute_gradients(x, y));
  }
  EXPECT_EQ(b.step(), 3);
  EXPECT_LT(relative_gap(b.trained_initializers(), a.trained_initializers(), start), 1e-4);
}

// BatchNorm running statistics are updated on the host and reach the device: the evaluation (which
// normalises with them) of a cuda-trained ResNet matches a CPU trainer given its weights and statistics.
TEST(CudaDevice, RunningStatisticsReachTheDevice) {
  if (!gpu_visible()) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  ImportedModel gpu_model = import_model(kModels + "resnet_opset17.onnx");
  ImportedModel cpu_model = import_model(kModels + "resnet_opset17.onnx");
  Trainer gpu(gpu_model.graph, options_for("momentum", Device::cuda(0)));
  Trainer cpu(cpu_model.graph, options_for("momentum", Device::cpu()));
  ASSERT_GT(gpu.running_stat_nodes(), 0);
  const std::vector<int64_t> input{8, 3, 32, 32};
  const std::map<std::string, Tensor> start = cloned(gpu.trained_initializers());
  train(gpu, 0, 3, input);
  const std::map<std::string, Tensor> trained = cloned(gpu.trained_initializers());
  EXPECT_FALSE(same_bits(trained, start));
  auto [val_x, val_y] = batch_for(100, {16, 3, 32, 32});
  const Trainer::Evaluation on_gpu = gpu.evaluate(val_x, val_y, 8);
  cpu.restore(trained, {{"global_step", Tensor::scalar_int64(3)}});
  const Trainer::Evaluation on_cpu = cpu.evaluate(val_x, val_y, 8);
  EXPECT_NEAR(on_gpu.loss, on_cpu.loss, 1e-3 * std::max(1.0, std::abs(on_cpu.loss)));
}

// --- data parallelism over NCCL (GPU only) ---

// One replica over NCCL (an all-reduce of one rank is the identity) steps exactly as one trainer on the
// same GPU: the device gradients, the weighting and the device step are wired as the single trainer's.
TEST(CudaDevice, DataParallelOverNcclOnOneGpuEqualsOneTrainer) {
  if (!gpu_visible()) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  ImportedModel one_model = import_model(kModels + "cnn_opset17.onnx");
  ImportedModel dp_model = import_model(kModels + "cnn_opset17.onnx");
  Trainer one(one_model.graph, options_for("momentum", Device::cuda(0)));
  DataParallelTrainer dp(dp_model.graph, {.trainer = options_for("momentum", Device::cuda(0)), .replicas = 1});
  const std::map<std::string, Tensor> start = cloned(one.trained_initializers());
  for (int s = 0; s < 4; ++s) {
    auto [x, y] = batch_for(s, kCnnInput);
    const float a = one.train_step(x, y), b = dp.train_step(x, y);
    EXPECT_NEAR(b, a, 1e-6 * std::max(1.0f, std::abs(a))) << "step " << s;
  }
  EXPECT_TRUE(dp.timing().on_devices);
  EXPECT_LT(relative_gap(dp.trained_initializers(), one.trained_initializers(), start), 1e-6);
}

// Two replicas on two GPUs follow two replicas on the CPU (NCCL sums in its own order: float32 rounding).
TEST(CudaDevice, DataParallelOverNcclOnTwoGpusFollowsTheCpu) {
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices, " << cuda::device_count() << " visible";
  ImportedModel cpu_model = import_model(kModels + "cnn_opset17.onnx");
  ImportedModel gpu_model = import_model(kModels + "cnn_opset17.onnx");
  DataParallelTrainer cpu(cpu_model.graph, {.trainer = options_for("momentum", Device::cpu()), .replicas = 2});
  DataParallelTrainer gpu(gpu_model.graph, {.trainer = options_for("momentum", Device::cuda(0)), .replicas = 2});
  const std::map<std::string, Tensor> start = cloned(cpu.trained_initializers());
  for (int s = 0; s < 6; ++s) {
    auto [x, y] = batch_for(s, kCnnInput);
    cpu.train_step(x, y);
    gpu.train_step(x, y);
  }
  EXPECT_LT(relative_gap(gpu.trained_initializers(), cpu.trained_initializers(), start), 1e-2);
  // Both replicas hold the same weights: every replica applied the same all-reduced gradient.
  EXPECT_TRUE(same_bits(gpu.replica(0).trained_initializers(), gpu.replica(1).trained_initializers()));
}

// --- central storage and the parameter server (GPU only) ---

// Replicas on cuda:0.. around the host storage follow the same replicas on the CPU: the storage's
// optimizer runs on the host in both, so only the replicas' forward/backward rounding differs.
void expect_central_storage_follows_the_cpu(int replicas) {
  ImportedModel cpu_model = import_model(kModels + "cnn_opset17.onnx");
  ImportedModel gpu_model = import_model(kModels + "cnn_opset17.onnx");
  CentralStorageTrainer cpu(cpu_model.graph, {.trainer = options_for("momentum", Device::cpu()), .replicas = replicas});
  CentralStorageTrainer gpu(gpu_model.graph,
                            {.trainer = options_for("momentum", Device::cuda(0)), .replicas = replicas});
  const std::map<std::string, Tensor> start = cloned(cpu.trained_initializers());
  for (int s = 0; s < 6; ++s) {
    auto [x, y] = batch_for(s, kCnnInput);
    const float a = cpu.train_step(x, y), b = gpu.train_step(x, y);
    EXPECT_NEAR(b, a, 1e-3 * std::max(1.0f, std::abs(a))) << "step " << s;
  }
  EXPECT_LT(relative_gap(gpu.trained_initializers(), cpu.trained_initializers(), start), 1e-2);
}

TEST(CudaDevice, CentralStorageWithAReplicaOnCudaFollowsTheCpu) {
  if (!gpu_visible()) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  expect_central_storage_follows_the_cpu(1);
}

TEST(CudaDevice, CentralStorageWithReplicasOnTwoGpusFollowsTheCpu) {
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices, " << cuda::device_count() << " visible";
  expect_central_storage_follows_the_cpu(2);
}

// One worker (no staleness, so the run is deterministic) on cuda:0 follows one worker on the CPU.
TEST(CudaDevice, ParameterServerWithAWorkerOnCudaFollowsTheCpu) {
  if (!gpu_visible()) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  ImportedModel cpu_model = import_model(kModels + "cnn_opset17.onnx");
  ImportedModel gpu_model = import_model(kModels + "cnn_opset17.onnx");
  ParameterServerTrainer cpu(cpu_model.graph, {.trainer = options_for("momentum", Device::cpu()), .servers = 2});
  ParameterServerTrainer gpu(gpu_model.graph, {.trainer = options_for("momentum", Device::cuda(0)), .servers = 2});
  const std::map<std::string, Tensor> start = cloned(cpu.trained_initializers());
  int step = 0;
  auto batches = [&step] { return batch_for(step++, kCnnInput); };
  const std::vector<float> a = cpu.train(6, batches);
  step = 0;
  const std::vector<float> b = gpu.train(6, batches);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-3 * std::max(1.0f, std::abs(a[i]))) << "push " << i;
  EXPECT_LT(relative_gap(gpu.trained_initializers(), cpu.trained_initializers(), start), 1e-2);
}

}  // namespace
}  // namespace onnxtrain
