// `--device cuda` end to end: the session and trainer on cuda:N, and the command line's checks of the
// devices a run needs. Without a GPU the tests assert the errors a user gets (which device, how many are
// visible, what to do); with one, that training on cuda:0 follows the CPU run.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "executor/inference_session.h"
#include "executor/trainer.h"
#include "frontend/importer.h"
#include "graph/error.h"
#include "kernels/cuda/cuda_runtime.h"
#include "kernels/cuda/device_query.h"
#include "tests/cli_run.h"

namespace onnxtrain {
namespace {

using testing_support::run_cli;

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";
const std::string kTrainArgs = "train " + kModels + "cnn_opset17.onnx --data synthetic:1,28,28:10:256 --batch 32 "
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

TEST(CudaDevice, CommandLineRefusesAMalformedDevice) {
  const testing_support::CliRun r = run_cli(kTrainArgs + " --device gpu0 -o /dev/null");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--device gpu0: expected cpu, cuda or cuda:N"), std::string::npos) << r.output;
}

TEST(CudaDevice, CommandLineNamesTheDevicesAPipelineNeeds) {
  const int visible = cuda::device_count();
  const int stages = visible + 1;
  const testing_support::CliRun r =
      run_cli(kTrainArgs + " --device cuda --strategy naive --stages " + std::to_string(stages) + " -o /dev/null");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  if (visible == 0) {
    EXPECT_NE(r.output.find("no CUDA device is visible"), std::string::npos) << r.output;
  } else {
    EXPECT_NE(r.output.find("needs cuda:0..cuda:" + std::to_string(stages - 1)), std::string::npos) << r.output;
  }
}

TEST(CudaDevice, ParameterServerStaysOnTheCpu) {
  const testing_support::CliRun r = run_cli(kTrainArgs + " --device cuda --strategy ps --replicas 2 -o /dev/null");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("runs on the CPU only"), std::string::npos) << r.output;
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

}  // namespace
}  // namespace onnxtrain
