// `onnxtrain export` (a checkpoint written as the trained model) and `train --init-from` (weights from a
// checkpoint or a model), as a user runs them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "frontend/importer.h"
#include "tests/cli_run.h"

namespace {

namespace fs = std::filesystem;
using onnxtrain::testing_support::CliRun;
CliRun run(const std::string& args) { return onnxtrain::testing_support::run_cli(args); }

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";
// 230 training rows after the 10% validation split: 4 batches of 64 per epoch.
const std::string kData = " --data synthetic:1,28,28:10:256 --test-data none --batch 64";

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::map<std::string, std::vector<double>> weights_of(const std::string& path) {
  std::map<std::string, std::vector<double>> w;
  const onnxtrain::ImportedModel m = onnxtrain::import_model(path);
  for (onnxtrain::ValueId id : m.graph.initializers)
    if (m.graph.value(id).data) w[m.graph.value(id).name] = m.graph.value(id).data->to_double();
  return w;
}

class ExportCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnxtrain_export_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// The last checkpoint of a run holds its final state: exported, it is the file the run wrote, byte for
// byte (inference mode, preprocessing metadata, or the baked nodes), for one device, replicas and a pipeline.
TEST_F(ExportCli, TheLastCheckpointExportsAsTheModelTrainWrote) {
  for (const std::string variant :
       {"", " --bake-normalization", " --strategy dp --replicas 2", " --strategy pipedream --stages 2"}) {
    SCOPED_TRACE(variant);
    fs::remove_all(path("ckpt"));
    const CliRun trained =
        run("train " + kModels + "cnn_opset17.onnx" + kData + " --epochs 2 --checkpoint-every 4 --checkpoint-dir " +
            path("ckpt") + variant + " -o " + path("trained.onnx"));
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
    const CliRun exported = run("export " + path("ckpt") + " -o " + path("exported.onnx"));
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    EXPECT_NE(exported.output.find("exported step 8 of"), std::string::npos) << exported.output;
    EXPECT_EQ(bytes_of(path("exported.onnx")), bytes_of(path("trained.onnx")));
  }
  // An earlier checkpoint is another model: the weights after 4 steps.
  const CliRun earlier = run("export " + path("ckpt") + "/checkpoint-00000004.otck -o " + path("step4.onnx"));
  ASSERT_EQ(earlier.exit_code, 0) << earlier.output;
  EXPECT_NE(weights_of(path("step4.onnx")), weights_of(path("trained.onnx")));
}

// small_plane_cnn's conv3 (3x3, stride 2, pads 1, over a 2x2 plane) has one output pixel that reads
// only the taps [1,3)x[1,3): training keeps just those (graph/autodiff/live_conv_taps.h). The written
// model, the exported last checkpoint and --init-from that checkpoint all hold the whole weight: the
// other taps exactly as the model had them, the live ones trained. With weight decay every tap trains.
TEST_F(ExportCli, ASinglePixelConvolutionTrainsItsLiveTapsAndIsWrittenWhole) {
  const std::string model = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/small_planes/small_plane_cnn.onnx";
  const std::string data = " --data synthetic:4,4,4:10:256 --test-data none --batch 64 --epochs 1";
  const CliRun trained = run("train " + model + data + " --checkpoint-every 2 --checkpoint-dir " + path("ckpt") +
                             " -o " + path("trained.onnx"));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("1 convolution with one output pixel trains only the taps that meet the input: 512 "
                                "of 1152 weights"),
            std::string::npos)
      << trained.output;
  const auto initial = weights_of(model);
  const auto written = weights_of(path("trained.onnx"));
  ASSERT_EQ(written.size(), initial.size());
  const std::vector<double>& before = initial.at("conv3.weight");
  const std::vector<double>& after = written.at("conv3.weight");
  ASSERT_EQ(after.size(), before.size());
  int live_changed = 0, dead_changed = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    const size_t tap = i % 9, row = tap / 3, column = tap % 3;
    const bool live = row >= 1 && column >= 1;
    (live ? live_changed : dead_changed) += after[i] != before[i];
  }
  EXPECT_EQ(dead_changed, 0);
  EXPECT_GT(live_changed, 16 * 8 * 4 / 2);
  for (const auto& [name, w] : written) EXPECT_NE(w, initial.at(name)) << name << " did not train";

  const CliRun exported = run("export " + path("ckpt") + " -o " + path("exported.onnx"));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_EQ(bytes_of(path("exported.onnx")), bytes_of(path("trained.onnx")));
  // Fine-tuning from the checkpoint at a negligible rate: the checkpoint's whole weight, not the model's.
  const CliRun tuned =
      run("train " + model + data + " --lr 1e-12 --init-from " + path("ckpt") + " -o " + path("from_checkpoint.onnx"));
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  const std::vector<double> tuned_weight = weights_of(path("from_checkpoint.onnx")).at("conv3.weight");
  for (size_t i = 0; i < after.size(); ++i) ASSERT_NEAR(tuned_weight[i], after[i], 1e-7) << i;

  const CliRun decayed = run("train " + model + data + " --weight-decay 0.01 -o " + path("decayed.onnx"));
  ASSERT_EQ(decayed.exit_code, 0) << decayed.output;
  EXPECT_NE(decayed.output.find("trains every tap"), std::string::npos) << decayed.output;
  const std::vector<double> decayed_weight = weights_of(path("decayed.onnx")).at("conv3.weight");
  EXPECT_NE(decayed_weight[0], before[0]) << "a dead tap under weight decay";
}

// small_plane_cnn's conv1 and conv2 have 2x2 output planes: training holds their weights tap-major
// (graph/autodiff/tap_major_conv_weights.h), and its evaluations run TapMajorConv on them. The written
// model has plain Conv nodes on W in the model's layout: `eval` of it scores what the final test line said
// (a weight written in the wrong layout would not), and the exported checkpoint is the same file.
TEST_F(ExportCli, ConvolutionsTrainedOnTapMajorWeightsAreWrittenInTheModelsLayout) {
  const std::string model = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/small_planes/small_plane_cnn.onnx";
  const std::string test = " --data synthetic:4,4,4:10:64";
  const CliRun trained = run("train " + model + " --data synthetic:4,4,4:10:256 --test-data synthetic:4,4,4:10:64" +
                             " --batch 64 --epochs 2 --checkpoint-every 8 --checkpoint-dir " + path("ckpt") + " -o " +
                             path("trained.onnx"));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find(
                "2 convolutions over small planes (2 to 16 output positions) train on weights held tap-major"),
            std::string::npos)
      << trained.output;
  const size_t final_line = trained.output.find("final: test loss ");
  ASSERT_NE(final_line, std::string::npos) << trained.output;
  const std::string final_loss = trained.output.substr(final_line + 17, 6);
  const CliRun scored = run("eval " + path("trained.onnx") + test);
  ASSERT_EQ(scored.exit_code, 0) << scored.output;
  EXPECT_NE(scored.output.find("eval: loss " + final_loss + ","), std::string::npos)
      << "final test loss " << final_loss << "\n"
      << scored.output;
  const CliRun exported = run("export " + path("ckpt") + " -o " + path("exported.onnx"));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_EQ(bytes_of(path("exported.onnx")), bytes_of(path("trained.onnx")));
}

// Under --precision bf16 they train tap-major too, in float32 (oneDNN's bfloat16 convolutions over such
// planes are the slow ones), and train says so; the written model is in the model's layout, as above.
TEST_F(ExportCli, UnderBf16TheSmallPlaneConvolutionsTrainInFloat32) {
  const std::string model = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/small_planes/small_plane_cnn.onnx";
  const CliRun trained =
      run("train " + model + " --data synthetic:4,4,4:10:128 --batch 64 --precision bf16 -o " + path("bf16.onnx"));
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("train on weights held tap-major, the layout of their CPU kernels, in float32 under "
                                "--precision bf16"),
            std::string::npos)
      << trained.output;
  const CliRun scored = run("eval " + path("bf16.onnx") + " --data synthetic:4,4,4:10:64");
  EXPECT_EQ(scored.exit_code, 0) << scored.output;
}

TEST_F(ExportCli, ExportErrorsNameTheFile) {
  fs::create_directories(path("empty"));
  CliRun r = run("export " + path("empty") + " -o " + path("m.onnx"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("holds no checkpoint"), std::string::npos) << r.output;
  r = run("export " + path("empty") + "/nothing.otck -o " + path("m.onnx"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  r = run("export " + path("empty"));  // -o is required
  EXPECT_EQ(r.exit_code, 2) << r.output;
  // A checkpoint of the MLP exported with the CNN as its model: refused, nothing written.
  ASSERT_EQ(run("train " + kModels + "mlp_opset17.onnx" + kData + " --checkpoint-every 4 --checkpoint-dir " +
                path("ckpt") + " -o " + path("mlp.onnx"))
                .exit_code,
            0);
  r = run("export " + path("ckpt") + " --model " + kModels + "cnn_opset17.onnx -o " + path("m.onnx"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("a checkpoint of another model?"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path("m.onnx")));
}

// --init-from: the frozen layer keeps the values it was loaded with (the source's, not the model file's),
// from a model and from a checkpoint directory; the others train on.
TEST_F(ExportCli, InitFromLoadsTheSourcesWeights) {
  ASSERT_EQ(run("train " + kModels + "mlp_opset17.onnx" + kData + " --lr 0.1 --checkpoint-every 4 --checkpoint-dir " +
                path("ckpt") + " -o " + path("first.onnx"))
                .exit_code,
            0);
  const auto first = weights_of(path("first.onnx"));
  const auto original = weights_of(kModels + "mlp_opset17.onnx");
  ASSERT_NE(first.at("fc1.weight"), original.at("fc1.weight"));
  for (const std::string source : {path("first.onnx"), path("ckpt")}) {
    SCOPED_TRACE(source);
    const CliRun r = run("train " + kModels + "mlp_opset17.onnx" + kData + " --init-from " + source +
                         " --freeze '^fc1\\.' -o " + path("second.onnx"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("6 tensors loaded, 6 of the model's 6 parameters"), std::string::npos) << r.output;
    const auto second = weights_of(path("second.onnx"));
    EXPECT_EQ(second.at("fc1.weight"), first.at("fc1.weight"));
    EXPECT_EQ(second.at("fc1.bias"), first.at("fc1.bias"));
    EXPECT_NE(second.at("fc2.weight"), first.at("fc2.weight"));
  }
}

TEST_F(ExportCli, InitFromRefusesAnotherModelAndAResume) {
  ASSERT_EQ(
      run("train " + kModels + "cnn_opset17.onnx" + kData + " --limit-batches 1 -o " + path("cnn.onnx")).exit_code, 0);
  CliRun r = run("train " + kModels + "mlp_opset17.onnx" + kData + " --init-from " + path("cnn.onnx") + " -o " +
                 path("m.onnx"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(path("cnn.onnx")), std::string::npos) << r.output;
  r = run("train " + kModels + "mlp_opset17.onnx" + kData + " --init-from " + path("nothing.onnx") + " -o " +
          path("m.onnx"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no such file or directory"), std::string::npos) << r.output;
  {  // a file that is no model: named (it was "not an ONNX model: ..." alone; an outside check)
    std::ofstream(path("script.py")) << "print(1)\n";
    r = run("train " + kModels + "mlp_opset17.onnx" + kData + " --init-from " + path("script.py") + " -o " +
            path("m.onnx"));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(path("script.py") + ": --init-from: not an ONNX model"), std::string::npos) << r.output;
  }
  r = run("train " + kModels + "mlp_opset17.onnx" + kData + " --init-from " + path("cnn.onnx") +
          " --resume --checkpoint-dir " + path("ckpt") + " -o " + path("m.onnx"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("excludes"), std::string::npos) << r.output;
}

}  // namespace
