// The `onnxtrain` binary as a user runs it: exit codes (0 ok, 1 user error, 2 bad usage), one clear
// error line, and `inspect --json` as one parseable document.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "frontend/importer.h"
#include "frontend/npy.h"
#include "tests/child_process.h"
#include "tests/cli_run.h"
#include "tests/free_port.h"

namespace {

using onnxtrain::testing_support::CliRun;
CliRun run(const std::string& args) { return onnxtrain::testing_support::run_cli(args); }

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";

// The values of a model file's parameters (Parameter initializers), by name.
std::map<std::string, std::vector<double>> parameter_values(const std::string& path) {
  std::map<std::string, std::vector<double>> values;
  const onnxtrain::ImportedModel m = onnxtrain::import_model(path);
  for (onnxtrain::ValueId id : m.graph.initializers) {
    const onnxtrain::Value& v = m.graph.value(id);
    if (v.data && v.role == onnxtrain::ValueRole::Parameter) values[v.name] = v.data->to_double();
  }
  return values;
}

TEST(Cli, InspectPrintsTheModel) {
  CliRun r = run("inspect " + kModels + "cnn_opset17.onnx");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* fragment : {"(batch,1,28,28)", "Conv", "52138 trainable", "FLOPs per sample", "cannot train yet"})
    EXPECT_NE(r.output.find(fragment), std::string::npos) << fragment << " missing in:\n" << r.output;
}

TEST(Cli, InspectJsonIsOneDocument) {
  CliRun r = run("inspect --json --batch 8 " + kModels + "resnet_opset17.onnx");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json doc = nlohmann::json::parse(r.output);
  EXPECT_EQ(doc["batch"], 8);
  EXPECT_EQ(doc["totals"]["trainable_parameters"], 19994);
  EXPECT_EQ(doc["totals"]["state_elements"], 288);
  EXPECT_EQ(doc["inputs"][0]["shape"], "(8,3,32,32)");
  EXPECT_GT(doc["totals"]["training_flops_per_sample"].get<double>(),
            doc["totals"]["forward_flops_per_sample"].get<double>());
  EXPECT_TRUE(doc["untrainable_ops"].empty());
}

TEST(Cli, UserErrorsExitOneWithTheFile) {
  CliRun r = run("inspect /nonexistent/model.onnx");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent/model.onnx: no such file"), std::string::npos) << r.output;
  r = run("inspect " + kModels + "fixtures.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("not an ONNX model"), std::string::npos) << r.output;
}

TEST(Cli, BadUsageExitsTwo) {
  EXPECT_EQ(run("").exit_code, 2);
  EXPECT_EQ(run("inspect").exit_code, 2);
  EXPECT_EQ(run("inspect --batch 0 " + kModels + "cnn_opset17.onnx").exit_code, 2);
  // 2^62 overflowed the shapes' element counts: negative FLOPs (issue 22).
  EXPECT_EQ(run("inspect --batch 4611686018427387904 " + kModels + "cnn_opset17.onnx").exit_code, 2);
  EXPECT_EQ(run("frobnicate").exit_code, 2);
}

// Usage errors exit 2 and say what was meant: a misspelt command, strategy or optimizer names the closest
// one; a flag that the chosen strategy would ignore (pipeline options without a pipeline, --replicas
// without a replicated strategy) is refused before anything loads, instead of doing nothing.
TEST(Cli, UsageErrorsExitTwoAndSuggestTheClosestName) {
  const std::string train = "train " + kModels + "mlp_opset17.onnx -o /tmp/onnxtrain_never_written.onnx ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"trian",
       "command 'trian' is not one of bench, eval, export, inspect, partition, run, simulate, train, version: did you "
       "mean "
       "'train'?"},
      {train + "--strategy ddp",
       "--strategy: 'ddp' is not one of single, dp, ps, naive, pipedream, spectrain, gpipe, "
       "1f1b, 2bw: did you mean 'dp'?"},
      {train + "--strategy DP", "did you mean 'dp'?"},
      {train + "--optimizer adamm",
       "--optimizer: 'adamm' is not one of sgd, momentum, nesterov, adam, adamw, adagrad: "
       "did you mean 'adam'?"},
      {train + "--stages 2", "--stages is a pipeline option: use it with --strategy naive | pipedream"},
      {train + "--plan plan.json", "--plan is a pipeline option"},
      {train + "--strategy pipedream --stages 2 --micro-batches 4",
       "--micro-batches splits the mini-batches of --strategy gpipe, 1f1b and 2bw only"},
      {train + "--replicas 2", "--replicas 2 needs a replicated strategy: --strategy dp"},
      {train + "--x-key images", "--x-key and --y-key name arrays of npz data: use them with --data npz:FILE"},
  };
  for (const auto& [args, message] : cases) {
    const CliRun r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists("/tmp/onnxtrain_never_written.onnx"));
}

// A --plan from `partition` sets the stage count (it was 1 unless --stages repeated it).
TEST(Cli, APlanSetsTheStageCount) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("onnxtrain_cli_plan_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  CliRun r = run("partition " + kModels + "mlp_opset17.onnx --stages 3 --batch 32 -o " + (dir / "plan.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run("train " + kModels +
          "mlp_opset17.onnx --data synthetic:1,28,28:10:256 --batch 32 --strategy pipedream --plan " +
          (dir / "plan.json").string() + " --test-data none -o " + (dir / "m.onnx").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pipedream over 3 stages"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

// eval scores a written model with the preprocessing its metadata record: the training run's final test
// line and eval agree (the same samples, loss and accuracy), top-5 is at least top-1, and the confusion
// matrix holds every sample once.
TEST(Cli, EvalScoresWhatTheTrainingRunsFinalLineSaid) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("onnxtrain_cli_eval_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string data = "synthetic:1,28,28:10:640";
  const CliRun trained = run("train " + kModels + "mlp_opset17.onnx --data " + data + " --test-data " + data +
                             " --epochs 5 --batch 32 --lr 0.1 -o " + (dir / "m.onnx").string());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  std::smatch final;  // refers into trained.output, which lives to the end of the test
  ASSERT_TRUE(std::regex_search(trained.output, final,
                                std::regex(R"(final: test loss ([0-9.]+), accuracy ([0-9.]+)% \((\d+) samples\))")))
      << trained.output;
  const CliRun r =
      run("eval " + (dir / "m.onnx").string() + " --data " + data + " --json " + (dir / "eval.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch eval;
  ASSERT_TRUE(std::regex_search(
      r.output, eval,
      std::regex(R"(eval: loss ([0-9.]+), accuracy ([0-9.]+)% \(top-1\), ([0-9.]+)% \(top-5\) \((\d+) samples\))")))
      << r.output;
  // The loss in double from the logits here, in float32 by the training graph's loss there: 4 decimals apart.
  EXPECT_NEAR(std::stod(eval[1].str()), std::stod(final[1].str()), 2e-4) << r.output;
  EXPECT_EQ(eval[2].str(), final[2].str()) << r.output;
  EXPECT_EQ(eval[4].str(), final[3].str()) << r.output;
  EXPECT_GE(std::stod(eval[3].str()), std::stod(eval[2].str()));
  EXPECT_GT(std::stod(eval[2].str()), 12.0) << "a model that learned nothing would make the agreement trivial";
  std::ifstream in(dir / "eval.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  int64_t in_matrix = 0, diagonal = 0;
  for (size_t l = 0; l < doc["confusion"].size(); ++l)
    for (size_t p = 0; p < doc["confusion"][l].size(); ++p) {
      in_matrix += doc["confusion"][l][p].get<int64_t>();
      if (l == p) diagonal += doc["confusion"][l][p].get<int64_t>();
    }
  EXPECT_EQ(in_matrix, doc["samples"].get<int64_t>());
  EXPECT_NEAR(static_cast<double>(diagonal) / in_matrix, doc["accuracy"].get<double>(), 1e-12);
  std::filesystem::remove_all(dir);
}

// --freeze REGEX: the matching parameters are not trained under any strategy and are written back as they
// were; the others train. A pattern that matches nothing is an error naming the parameters.
TEST(Cli, FrozenParametersAreWrittenBackUnchanged) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("onnxtrain_cli_freeze_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto before = parameter_values(kModels + "mlp_opset17.onnx");
  for (const std::string strategy : {"", " --strategy dp --replicas 2", " --strategy pipedream --stages 2"}) {
    SCOPED_TRACE(strategy);
    const std::string out = (dir / "m.onnx").string();
    const CliRun r = run("train " + kModels +
                         "mlp_opset17.onnx --data synthetic:1,28,28:10:256 --test-data none "
                         "--freeze '^fc1\\.'" +
                         strategy + " -o " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("frozen (--freeze): 2 of 6 parameters, not trained: fc1.weight, fc1.bias"),
              std::string::npos)
        << r.output;
    const auto after = parameter_values(out);
    EXPECT_EQ(after.at("fc1.weight"), before.at("fc1.weight"));
    EXPECT_EQ(after.at("fc1.bias"), before.at("fc1.bias"));
    EXPECT_NE(after.at("fc2.weight"), before.at("fc2.weight"));
  }
  const CliRun r = run("train " + kModels + "mlp_opset17.onnx --data synthetic:1,28,28:10:256 --freeze conv -o " +
                       (dir / "m.onnx").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--freeze 'conv' matches no parameter"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

// --label-smoothing: the first step's loss (the same batch and weights everywhere) moves away from the plain
// cross-entropy's, by the same amount on one device, over dp replicas and through a gpipe pipeline, whose
// last stage computes the smoothed loss (loss_test compares the loss and its gradient with PyTorch's).
TEST(Cli, LabelSmoothingIsTheSameLossUnderEveryStrategy) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("onnxtrain_cli_smoothing_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto first_loss = [&](const std::string& options) {
    const std::string metrics = (dir / "metrics.jsonl").string();
    const CliRun r = run("train " + kModels + "mlp_opset17.onnx --data synthetic:1,28,28:10:256 --test-data none " +
                         "--limit-batches 1 --metrics " + metrics + options + " -o " + (dir / "m.onnx").string());
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::ifstream in(metrics);
    std::string line;
    std::getline(in, line);
    return nlohmann::json::parse(line).at("loss").get<double>();
  };
  const double plain = first_loss("");
  const double smoothed = first_loss(" --label-smoothing 0.1");
  EXPECT_GT(std::abs(smoothed - plain), 1e-3) << plain << " vs " << smoothed;
  EXPECT_NEAR(first_loss(" --label-smoothing 0.1 --strategy dp --replicas 2"), smoothed, 1e-5);
  EXPECT_NEAR(first_loss(" --label-smoothing 0.1 --strategy gpipe --stages 2"), smoothed, 1e-5);
  const CliRun r = run("train " + kModels + "mlp_opset17.onnx --data synthetic:1,28,28:10:64 --loss mse " +
                       "--label-smoothing 0.1 -o " + (dir / "m.onnx").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("use it with --loss cross-entropy"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

// Every run writes the options it was given beside its model (OUT.onnx.toml); --config reads them back and
// trains the same model byte for byte; an option on the command line wins over the file's.
TEST(Cli, TheSavedConfigRerunsTheRunAndTheCommandLineWins) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("onnxtrain_cli_config_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto bytes = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string first = (dir / "first.onnx").string();
  CliRun r = run("train " + kModels + "mlp_opset17.onnx --data synthetic:1,28,28:10:256 --test-data none " +
                 "--optimizer adam --lr 0.002 --epochs 2 -o " + first);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string config = bytes(first + ".toml");
  EXPECT_NE(config.find("lr=0.002"), std::string::npos) << config;
  EXPECT_NE(config.find("# onnxtrain.preprocess.mean = "), std::string::npos) << config;
  r = run("train --config " + first + ".toml -o " + (dir / "again.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(bytes(dir / "again.onnx"), bytes(first));
  r = run("train --config " + first + ".toml --lr 0.004 -o " + (dir / "other.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("adam lr 0.004"), std::string::npos) << r.output;
  EXPECT_NE(bytes(dir / "other.onnx"), bytes(first));
  EXPECT_NE(bytes(dir / "other.onnx.toml").find("lr=0.004"), std::string::npos);
  r = run("train --config " + (dir / "missing.toml").string() + " -o " + (dir / "m.onnx").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("missing.toml: --config"), std::string::npos) << r.output;
  std::ofstream(dir / "sectioned.toml") << "[train]\nlr = 0.1\n";
  r = run("train --config " + (dir / "sectioned.toml").string() + " -o " + (dir / "m.onnx").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("section [train]"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

// --clip-grad-norm: one plain SGD step of lr 1 moves the weights by exactly the clipped gradient, whose
// total norm is the limit (torch.nn.utils.clip_grad_norm_'s max_norm / (norm + 1e-6) scaling), on one
// device and over dp replicas (clipped after the all-reduce); unclipped the same step moves them far more.
TEST(Cli, ClipGradNormBoundsTheUpdate) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("onnxtrain_cli_clip_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto before = parameter_values(kModels + "mlp_opset17.onnx");
  auto step_norm = [&](const std::string& options) {
    const std::string out = (dir / "m.onnx").string();
    const CliRun r = run("train " + kModels + "mlp_opset17.onnx --data synthetic:1,28,28:10:256 --test-data none " +
                         "--limit-batches 1 --optimizer sgd --lr 1" + options + " -o " + out);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    double squares = 0;
    for (const auto& [name, after] : parameter_values(out))
      for (size_t i = 0; i < after.size(); ++i)
        squares += (after[i] - before.at(name)[i]) * (after[i] - before.at(name)[i]);
    return std::sqrt(squares);
  };
  EXPECT_GT(step_norm(""), 0.05);
  EXPECT_NEAR(step_norm(" --clip-grad-norm 0.005"), 0.005, 5e-5);
  EXPECT_NEAR(step_norm(" --clip-grad-norm 0.005 --strategy dp --replicas 2"), 0.005, 5e-5);
  EXPECT_NEAR(step_norm(" --clip-grad-norm 0.005 --strategy dp --central-storage --replicas 2"), 0.005, 5e-5);
  // The one push; plain SGD under ps once failed an internal check on the first pull (weight_memory.cc).
  EXPECT_NEAR(step_norm(" --clip-grad-norm 0.005 --strategy ps --replicas 2"), 0.005, 5e-5);
  const CliRun r = run("train " + kModels + "mlp_opset17.onnx --data synthetic:1,28,28:10:64 --clip-grad-norm 1 " +
                       "--strategy pipedream --stages 2 -o " + (dir / "m.onnx").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  std::filesystem::remove_all(dir);
}

// --accumulate K: two steps of 64 rows in 4 passes each write the model that two plain steps of 64 write
// (up to the summation order), on one device and over dp replicas (each accumulates its share before
// the all-reduce); the strategies that cannot accumulate refuse it, exit 2.
TEST(Cli, AccumulateGivesTheUpdateOfTheWholeBatch) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("onnxtrain_cli_accumulate_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto initial = parameter_values(kModels + "mlp_opset17.onnx");
  auto train = [&](const std::string& options) {
    const std::string out = (dir / "m.onnx").string();
    const CliRun r = run("train " + kModels + "mlp_opset17.onnx --data synthetic:1,28,28:10:256 --test-data none " +
                         "--validation 0 --limit-batches 2 --optimizer sgd --lr 0.5" + options + " -o " + out);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return std::pair(parameter_values(out), r.output);
  };
  const auto [whole, whole_output] = train("");
  double moved = 0;
  for (const auto& [name, values] : whole)
    for (size_t i = 0; i < values.size(); ++i) moved = std::max(moved, std::abs(values[i] - initial.at(name)[i]));
  EXPECT_GT(moved, 1e-3);
  for (const std::string& options : {" --accumulate 4", " --accumulate 2 --strategy dp --replicas 2"}) {
    const auto [accumulated, output] = train(options);
    EXPECT_NE(output.find("passes"), std::string::npos) << output;
    for (const auto& [name, values] : whole)
      for (size_t i = 0; i < values.size(); ++i)
        ASSERT_NEAR(accumulated.at(name)[i], values[i], 1e-5) << options << ": " << name << "[" << i << "]";
  }
  // The flag does reach the trainer: with BatchNorm each pass normalises by its own rows' statistics,
  // which changes the update.
  auto resnet = [&](const std::string& options) {
    const std::string out = (dir / "r.onnx").string();
    const CliRun r = run("train " + kModels + "resnet_opset17.onnx --data synthetic:3,32,32:10:64 --test-data none " +
                         "--validation 0 --limit-batches 1 --optimizer sgd --lr 0.5" + options + " -o " + out);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return parameter_values(out);
  };
  const auto plain = resnet(""), sliced = resnet(" --accumulate 2");
  double differs = 0;
  for (const auto& [name, values] : plain)
    for (size_t i = 0; i < values.size(); ++i) differs = std::max(differs, std::abs(values[i] - sliced.at(name)[i]));
  EXPECT_GT(differs, 1e-4);
  for (const std::string& options : {" --strategy gpipe --stages 2", " --strategy pipedream --stages 2",
                                     " --strategy dp --replicas 2 --bucket-mb 1", " --device cuda"}) {
    const CliRun r = run("train " + kModels + "mlp_opset17.onnx --data synthetic:1,28,28:10:64 --accumulate 2" +
                         options + " -o " + (dir / "m.onnx").string());
    EXPECT_EQ(r.exit_code, 2) << options << ": " << r.output;
    EXPECT_NE(r.output.find("--accumulate"), std::string::npos) << r.output;
  }
  std::filesystem::remove_all(dir);
}

// imagefolder:DIR trains from torchvision's layout, with --augment, and the written model records the
// class names; eval scores the folder's val/ split with them as the training run's final line did.
TEST(Cli, ImageFolderTrainsWithAugmentationAndEvaluates) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("onnxtrain_cli_imagefolder_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string data = "imagefolder:" + std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/imagefolder";
  const std::string out = (dir / "m.onnx").string();
  const CliRun trained = run("train " + kModels + "resnet_opset17.onnx --data " + data +
                             " --augment crop:4,flip --batch 3 --epochs 2 --validation 0 -o " + out);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("6 images resized to 32x32, 1 other files skipped"), std::string::npos)
      << trained.output;
  std::smatch final;
  ASSERT_TRUE(
      std::regex_search(trained.output, final, std::regex(R"(final: test .*accuracy ([0-9.]+)% \(2 samples\))")))
      << trained.output;
  onnx::ModelProto model;
  std::ifstream in(out, std::ios::binary);
  ASSERT_TRUE(model.ParseFromIstream(&in));
  std::map<std::string, std::string> metadata;
  for (const auto& p : model.metadata_props()) metadata[p.key()] = p.value();
  EXPECT_EQ(metadata["onnxtrain.class_names"], "[\"ankle_boot\", \"bag\"]");
  const CliRun r = run("eval " + out + " --data " + data);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("accuracy " + final[1].str() + "% (top-1)"), std::string::npos) << r.output;
  EXPECT_EQ(run("train " + kModels + "resnet_opset17.onnx --data " + data + " --augment crop:0 -o " + out).exit_code,
            2);
  std::filesystem::remove_all(dir);
}

// A model written with --bake-normalization takes the raw uint8 pixels: eval feeds them so, and scores what
// the training run's final line said.
TEST(Cli, EvalFeedsABakedModelTheRawPixels) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("onnxtrain_cli_eval_baked_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "baked.onnx").string();
  const CliRun trained =
      run("train " + kModels + "mlp_opset17.onnx --limit-batches 20 --lr 0.05 --bake-normalization -o " + out);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  std::smatch final;
  ASSERT_TRUE(
      std::regex_search(trained.output, final, std::regex(R"(final: test loss ([0-9.]+), accuracy ([0-9.]+)%)")))
      << trained.output;
  EXPECT_GT(std::stod(final[2].str()), 40.0) << "a model that learned nothing would make the agreement trivial";
  const CliRun r = run("eval " + out + " --data fashion-mnist");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("accuracy " + final[2].str() + "% (top-1)"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

// Export pitfalls are said before training: a final Softmax under cross-entropy (a warning), and a deep
// convolutional network without normalisation nodes, which is what folding BatchNorm into the Conv
// weights leaves (a note). The fixtures are edited copies: resnet with its BatchNormalization nodes made
// Identity, mlp with a Softmax after its logits.
TEST(Cli, ExportPitfallsAreSaidBeforeTraining) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("onnxtrain_cli_pitfalls_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto edited = [&](const std::string& model, const std::string& name, const auto& edit) {
    onnx::ModelProto proto;
    std::ifstream in(kModels + model, std::ios::binary);
    EXPECT_TRUE(proto.ParseFromIstream(&in));
    edit(*proto.mutable_graph());
    const std::string path = (dir / name).string();
    std::ofstream out(path, std::ios::binary);
    EXPECT_TRUE(proto.SerializeToOstream(&out));
    return path;
  };
  const std::string folded = edited("resnet_opset17.onnx", "folded.onnx", [](onnx::GraphProto& g) {
    for (onnx::NodeProto& n : *g.mutable_node()) {
      if (n.op_type() != "BatchNormalization") continue;
      const std::string x = n.input(0), y = n.output(0);
      n.Clear();
      n.set_op_type("Identity");
      n.add_input(x);
      n.add_output(y);
    }
  });
  const std::string softmax = edited("mlp_opset17.onnx", "softmax.onnx", [](onnx::GraphProto& g) {
    onnx::NodeProto* n = g.add_node();
    n->set_name("final_softmax");
    n->set_op_type("Softmax");
    n->add_input(g.output(0).name());
    n->add_output("probabilities");
    g.mutable_output(0)->set_name("probabilities");
  });
  const std::string common = " --limit-batches 1 --test-data none -o " + (dir / "m.onnx").string();
  CliRun r = run("train " + folded + " --data synthetic:3,32,32:10:64" + common);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("note: 6 Conv nodes and no normalisation node"), std::string::npos) << r.output;
  r = run("train " + softmax + " --data synthetic:1,28,28:10:64" + common);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: the model's output 'probabilities' comes from a Softmax node ('final_softmax')"),
            std::string::npos)
      << r.output;
  r = run("train " + kModels + "resnet_opset17.onnx --data synthetic:3,32,32:10:64" + common);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("note:"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("warning:"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

TEST(Cli, RunWritesOutputsAndBenchmarks) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("onnxtrain_cli_run_" + std::to_string(::getpid()))).string();
  CliRun r = run("run " + kModels + "cnn_opset17.onnx --input input=" + kModels +
                 "expected/fashion_batch3_input.npy -o " + dir + " --bench 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("logits: float32 (3,10)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("samples/s"), std::string::npos) << r.output;
  onnxtrain::Tensor got = onnxtrain::read_npy(dir + "/logits.npy");
  onnxtrain::Tensor expected = onnxtrain::read_npy(kModels + "expected/cnn_opset17_logits.npy");
  ASSERT_EQ(got.sizes(), expected.sizes());
  auto a = got.to_double(), b = expected.to_double();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 + 1e-4 * std::abs(b[i]));
  std::filesystem::remove_all(dir);

  r = run("run " + kModels + "cnn_opset17.onnx --input " + kModels + "mlp_opset17.onnx");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("not a .npy file"), std::string::npos) << r.output;
  // -o naming a file, not a folder: one line naming it, exit 1 (was exit 3).
  r = run("run " + kModels + "cnn_opset17.onnx --input input=" + kModels + "expected/fashion_batch3_input.npy -o " +
          kModels + "cnn_opset17.onnx");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cnn_opset17.onnx"), std::string::npos) << r.output;
}

TEST(Cli, HelpExitsZero) {
  CliRun r = run("inspect --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("--batch"), std::string::npos);
  EXPECT_EQ(run("version").exit_code, 0);
}

// Issue 22: -o is checked before the first step: a folder, or anything but a regular file (a device or a
// pipe: as root `-o /dev/full` replaced the device node with the model) is refused, exit 1, and left as
// it was. A FIFO in a temporary folder stands in for the device, so that a regression harms nothing.
TEST(Cli, OutputThatIsNotARegularFileIsRefusedBeforeTraining) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("onnxtrain_out_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "folder");
  const std::string fifo = (dir / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  for (const std::string& out : {(dir / "folder").string(), fifo}) {
    const CliRun r = run("train " + kModels + "mlp_opset17.onnx --data synthetic:1,28,28:10:64 -o " + out);
    EXPECT_EQ(r.exit_code, 1) << out << "\n" << r.output;
    EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << out << ": trained before refusing\n" << r.output;
  }
  EXPECT_TRUE(std::filesystem::is_fifo(fifo)) << "the pipe was replaced";
  EXPECT_TRUE(std::filesystem::is_directory(dir / "folder"));
  std::filesystem::remove_all(dir);
}

// Issue 22: a diverged run (lr 1e6) wrote a model of NaN or overflowing weights with exit 0 under every
// strategy. Now every strategy stops at the non-finite loss, or refuses after the evaluation that overflows,
// exit 1, and writes nothing.
TEST(Cli, ADivergedRunWritesNoModelUnderAnyStrategy) {
  const std::string out =
      (std::filesystem::temp_directory_path() / ("onnxtrain_nan_" + std::to_string(::getpid()) + ".onnx")).string();
  for (const std::string strategy :
       {"single", "dp --replicas 2", "dp --replicas 2 --central-storage", "ps --replicas 2", "naive --stages 2",
        "pipedream --stages 2", "spectrain --stages 2", "gpipe --stages 2 --micro-batches 2",
        "1f1b --stages 2 --micro-batches 2", "2bw --stages 2 --micro-batches 2"}) {
    std::filesystem::remove(out);
    const CliRun r = run("train " + kModels + "cnn_opset17.onnx --data synthetic:1,28,28:10:256 --lr 1e6 --strategy " +
                         strategy + " -o " + out);
    EXPECT_EQ(r.exit_code, 1) << strategy << "\n" << r.output;
    EXPECT_TRUE(r.output.find("the loss became") != std::string::npos ||
                r.output.find("loss is NaN") != std::string::npos ||
                r.output.find("loss is infinite") != std::string::npos)
        << strategy << "\n"
        << r.output;
    EXPECT_FALSE(std::filesystem::exists(out)) << strategy << ": a diverged model was written";
  }
}

}  // namespace

namespace {

TEST(Cli, TrainLowersTheLossAndWritesAModelThatRuns) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("onnxtrain_cli_train_" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  const std::string metrics = dir + "/metrics.jsonl", out = dir + "/cnn_trained.onnx";
  CliRun r =
      run("train " + kModels + "cnn_opset17.onnx --data synthetic:1,28,28:10:512 --epochs 2 --batch 32 --metrics " +
          metrics + " -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("validation loss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("accuracy"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("wrote " + out), std::string::npos) << r.output;

  std::vector<double> losses;
  int epochs = 0;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("step")) {
      losses.push_back(j["loss"].get<double>());
      EXPECT_TRUE(j.contains("lr") && j.contains("samples_per_s") && j.contains("epoch")) << line;
    } else if (j.contains("val_accuracy")) {
      ++epochs;
      EXPECT_TRUE(j.contains("val_loss")) << line;
    }
  }
  ASSERT_EQ(losses.size(), 30u);  // 2 epochs of ceil(461 / 32) batches (51 of 512 rows held out)
  EXPECT_EQ(epochs, 2);
  double last5 = 0;
  for (size_t i = losses.size() - 5; i < losses.size(); ++i) last5 += losses[i] / 5;
  EXPECT_LT(last5, losses.front());

  onnxtrain::ImportedModel trained = onnxtrain::import_model(out);
  EXPECT_EQ(trained.graph.inputs.size(), 1u);
  r = run("run " + out + " --input input=" + kModels + "expected/fashion_batch3_input.npy -o " + dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("logits: float32 (3,10)"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

TEST(Cli, TrainUserErrorsExitOne) {
  CliRun r = run("train " + kModels +
                 "cnn_opset17.onnx --data idx:/nonexistent/images.gz,/nonexistent/labels.gz -o /tmp/x.onnx");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent/images.gz"), std::string::npos) << r.output;
  r = run("train " + kModels + "cnn_opset17.onnx --data synthetic:3,32,32:10:64 -o /tmp/x.onnx");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("do not match the model input"), std::string::npos) << r.output;
  // An optimizer outside the set is bad usage (exit 2), named with the set.
  r = run("train " + kModels + "cnn_opset17.onnx --data synthetic --optimizer rmsprop -o /tmp/x.onnx");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--optimizer: 'rmsprop' is not one of sgd, momentum"), std::string::npos) << r.output;
  // Issue 22: sizes from the command line are checked before anything is allocated (was std::bad_alloc,
  // exit 3), and options that would do nothing are refused before training (was: no checkpoint, exit 0).
  r = run("train " + kModels + "mlp_opset17.onnx --data synthetic:1,28,28:10:99999999999 -o /tmp/x.onnx");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("need more memory than this machine has"), std::string::npos) << r.output;
  r = run("train " + kModels + "mlp_opset17.onnx --data synthetic:4611686018427387904,4,4:10:8 -o /tmp/x.onnx");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  r = run("train " + kModels + "mlp_opset17.onnx --data synthetic:1,28,28:10:64 --checkpoint-every 2 -o /tmp/x.onnx");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--checkpoint-every 2 needs --checkpoint-dir"), std::string::npos) << r.output;
  // A directory option that names a file: one line, exit 1 (was a filesystem_error, exit 3).
  r = run("train " + kModels + "mlp_opset17.onnx --data synthetic:1,28,28:10:64 --dump-gradients " + kModels +
          "cnn_opset17.onnx -o /tmp/x.onnx");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("not a directory"), std::string::npos) << r.output;
}

}  // namespace

// Reliability: every input or resource problem is one line, exit 1, never a 689 KB line, an abort, a
// negative figure or a silently truncated file.
namespace {

namespace fs = std::filesystem;

// `onnxtrain ARGS` after the shell commands `setup` (limits, environment), stdout and stderr together.
CliRun run_after(const std::string& setup, const std::string& args) {
  const std::string command = onnxtrain::testing_support::kFixedThreads + setup + "; exec " +
                              std::string(ONNXTRAIN_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// Files may not grow at all (RLIMIT_FSIZE 0, SIGXFSZ ignored): every write fails with EFBIG, as on a
// full disk, without needing root or a full disk.
const std::string kNoFileGrowth = "trap '' XFSZ; ulimit -f 0";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

size_t lines_of(const std::string& text) { return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')); }

// A model of one node, `op` named `name`: float32 x (batch, dims...) -> y of the same shape, opset 17.
onnx::ModelProto one_node_model(const std::string& op, const std::string& name, const std::vector<int64_t>& dims) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name(name);
  for (const char* io : {"x", "y"}) {
    onnx::ValueInfoProto* v = std::string(io) == "x" ? g->add_input() : g->add_output();
    v->set_name(io);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param("batch");
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  }
  onnx::NodeProto* n = g->add_node();
  n->set_name(name);
  n->set_op_type(op);
  n->add_input("x");
  n->add_output("y");
  return m;
}

class CliReliability : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnxtrain_cli_reliability_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // `name` in the scratch folder, holding `content`.
  std::string existing(const std::string& name, const std::string& content) {
    std::ofstream(dir_ / name, std::ios::binary) << content;
    return (dir_ / name).string();
  }
  std::vector<std::string> files(const fs::path& folder) const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(folder)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  fs::path dir_;
};

// torchrun-style WORLD_SIZE=100000 printed every missing rank in one 689 KB error line.
TEST_F(CliReliability, AHugeWorldSizeIsOneShortLine) {
  for (const char* limit : {"ulimit -n 1024", "ulimit -n 20000"}) {
    const CliRun r =
        run_after(std::string(limit) + "; export WORLD_SIZE=100000 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                      std::to_string(onnxtrain::testing_support::free_loopback_port()),
                  "train " + kModels +
                      "mlp_opset17.onnx --data synthetic:1,28,28:10:64 --strategy dp "
                      "--comm-timeout 1 -o " +
                      (dir_ / "m.onnx").string());
    EXPECT_EQ(r.exit_code, 1) << r.output.substr(0, 2000);
    EXPECT_EQ(lines_of(r.output), 1u) << r.output.substr(0, 2000);
    EXPECT_LT(r.output.size(), 1000u) << r.output.substr(0, 2000);
    EXPECT_NE(r.output.find("onnxtrain: error: TCP communicator: world size 100000 (WORLD_SIZE) is too large"),
              std::string::npos)
        << r.output.substr(0, 2000);
  }
  // Within the limit: the ranks that never came are a few and a count.
  const CliRun r = run_after("export WORLD_SIZE=300 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                                 std::to_string(onnxtrain::testing_support::free_loopback_port()),
                             "train " + kModels +
                                 "mlp_opset17.onnx --data synthetic:1,28,28:10:64 --strategy dp "
                                 "--comm-timeout 1 -o " +
                                 (dir_ / "m.onnx").string());
  EXPECT_EQ(r.exit_code, 1) << r.output.substr(0, 2000);
  EXPECT_NE(r.output.find("waiting for ranks 1, 2, 3, 4, 5, 6, 7, 8 and 291 more to connect"), std::string::npos)
      << r.output.substr(0, 2000);
  EXPECT_LT(r.output.size(), 1000u);
}

// --strategy dp --replicas 1000 under ulimit -v 4000000 aborted ("terminate called without an active
// exception", exit 134). Now: one line naming --replicas, exit 1, before the replicas are built.
TEST_F(CliReliability, ReplicasBeyondTheMemoryLimitAreOneLineExitOne) {
  if (onnxtrain::testing_support::kSanitized) GTEST_SKIP() << "an ASan binary cannot start under ulimit -v";
  const CliRun r = run_after("ulimit -v 4000000", "train " + kModels +
                                                      "mlp_opset17.onnx --data synthetic:1,28,28:10:1024 "
                                                      "--strategy dp --replicas 1000 --batch 1000 --epochs 1 -o " +
                                                      (dir_ / "m.onnx").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("onnxtrain: error: --replicas 1000: not enough memory"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("terminate"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "m.onnx"));
}

// Issue: a full disk was a 0-byte or truncated file with exit 0. Every writer now goes through a temporary
// file and a rename, with each write checked: "FILE: write failed: <strerror>", exit 1, and the file it would
// have replaced keeps its content.
TEST_F(CliReliability, AFailedWriteIsExitOneAndKeepsTheOldFile) {
  // run -o DIR: the outputs as .npy
  const fs::path outputs = dir_ / "outputs";
  fs::create_directories(outputs);
  std::ofstream(outputs / "logits.npy") << "old logits";
  CliRun r = run_after(kNoFileGrowth, "run " + kModels + "cnn_opset17.onnx --input input=" + kModels +
                                          "expected/fashion_batch3_input.npy -o " + outputs.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("onnxtrain: error: " + (outputs / "logits.npy").string() + ": write failed: File too large"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(read_file(outputs / "logits.npy"), "old logits");
  EXPECT_EQ(files(outputs), std::vector<std::string>{"logits.npy"});

  // train -o: the trained model
  const std::string model = existing("model.onnx", "old model");
  r = run_after(kNoFileGrowth, "train " + kModels +
                                   "mlp_opset17.onnx --data synthetic:1,28,28:10:64 --epochs 1 "
                                   "--validation 0 --test-data none -o " +
                                   model);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("onnxtrain: error: " + model + ": write failed: File too large"), std::string::npos)
      << r.output;
  EXPECT_EQ(read_file(model), "old model");

  // partition -o: the plan; simulate --json: a report (tools/text_file.cc)
  const std::string plan = existing("plan.json", "old plan");
  r = run_after(kNoFileGrowth, "partition " + kModels + "mlp_opset17.onnx --stages 2 -o " + plan);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("onnxtrain: error: " + plan + ": write failed: File too large"), std::string::npos)
      << r.output;
  EXPECT_EQ(read_file(plan), "old plan");
  const std::string report = existing("report.json", "old report");
  r = run_after(kNoFileGrowth,
                "simulate " + kModels + "mlp_opset17.onnx --machine 8xh100 --strategies dp:2 --json " + report);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("onnxtrain: error: " + report + ": write failed: File too large"), std::string::npos)
      << r.output;
  EXPECT_EQ(read_file(report), "old report");

  EXPECT_EQ(files(dir_), (std::vector<std::string>{"model.onnx", "outputs", "plan.json", "report.json"}))
      << "a temporary file was left behind";
}

// An outside check (2026-12-06) with models and commands of its own: a range error printed 300 digits of
// the largest double and let inf and nan through; -o '' and -o /proc/FILE failed only after the training;
// -o naming the model being trained replaced it; a --batch above the training rows printed a throughput
// counted in rows that did not exist.
TEST_F(CliReliability, OutsideCheckOptionsAndOutputsFailClearlyBeforeTraining) {
  const std::string data = " --data synthetic:1,28,28:10:64 --limit-batches 2 --validation 0 --test-data none";
  const std::string model = kModels + "mlp_opset17.onnx";
  const std::string out = (dir_ / "m.onnx").string();
  for (const auto& [option, message] :
       std::vector<std::pair<std::string, std::string>>{{"--batch 0", "--batch: must be a number above 0, got 0"},
                                                        {"--batch -4", "--batch: must be a number above 0, got -4"},
                                                        {"--lr nan", "--lr: must be a number above 0, got nan"},
                                                        {"--lr inf", "--lr: must be a number above 0, got inf"},
                                                        {"--epochs 0", "--epochs: must be a number above 0, got 0"}}) {
    const CliRun r = run_after("true", "train " + model + data + " " + option + " -o " + out);
    EXPECT_EQ(r.exit_code, 2) << option << ": " << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << option << ": " << r.output;
    EXPECT_LT(r.output.size(), 200u) << option << ": " << r.output;
  }
  // --config naming a folder trained without the options (a second outside check).
  CliRun r = run_after("true", "train " + model + data + " --config " + dir_.string() + " -o " + out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(dir_.string() + ": --config: is a folder"), std::string::npos) << r.output;
  r = run_after("true", "train " + model + data + " -o ''");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("onnxtrain: error: -o '': an empty path"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << "it trained first: " << r.output;
  r = run_after("true", "train " + model + data + " -o " + (dir_ / "sub").string() + "/");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("names a folder"), std::string::npos) << r.output;
  if (fs::is_directory("/proc")) {  // access() grants root /proc, where no file can be made
    r = run_after("true", "train " + model + data + " -o /proc/onnxtrain_cli_test.onnx");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    const bool named = r.output.find("cannot create a file in /proc") != std::string::npos ||
                       r.output.find("the folder /proc is not writable") != std::string::npos;  // not root
    EXPECT_TRUE(named) << r.output;
    EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << "it trained first: " << r.output;
  }
  const std::string same = (dir_ / "same.onnx").string();
  fs::copy_file(model, same);
  const std::string before = read_file(same);
  r = run_after("true", "train " + same + data + " -o " + same);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is the model being trained"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(same), before);
  // An op without an onnxtrain schema in the path (Hardmax; ONNX's inference types it): refused as that,
  // with its node, not as a shape error of a node after it (NonMaxSuppression's Shape was named).
  {
    const std::string path =
        existing("hardmax.onnx", one_node_model("Hardmax", "the_hardmax", {784}).SerializeAsString());
    r = run_after("true", "train " + path + data + " -o " + out);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("onnxtrain cannot train Hardmax yet (the first: node 'the_hardmax')"), std::string::npos)
        << r.output;
  }
  r = run_after("true", "train " + model +
                            " --data synthetic:1,28,28:10:64 --validation 0 --test-data none --batch "
                            "1000 --log-every 1 -o " +
                            out);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--batch 1000 is more than the 64 training samples: each mini-batch is all 64 of them"),
            std::string::npos)
      << r.output;
}

// inspect --batch 2^31 of a model whose activations exceed int64 bytes printed negative FLOPs and bytes.
TEST_F(CliReliability, InspectAHugeBatchPrintsNoNegativeFigure) {
  // x (batch, 65536, 65536) -> Relu -> y: 2^63 elements per output at a batch of 2^31.
  const std::string path = existing("huge.onnx", one_node_model("Relu", "relu", {65536, 65536}).SerializeAsString());

  CliRun r = run("inspect --json --batch 2147483648 " + path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json doc = nlohmann::json::parse(r.output);
  // 2^63 elements do not fit int64: the relu's costs are unknown (0), never negative.
  for (const auto& node : doc["nodes"]) {
    EXPECT_GE(node["forward_flops"].get<double>(), 0) << node;
    EXPECT_GE(node["activation_bytes"].get<double>(), 0) << node;
  }
  EXPECT_GE(doc["totals"]["activation_bytes_per_sample"].get<double>(), 0);
  r = run("inspect --batch 2147483648 " + path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(std::regex_search(r.output, std::regex("-[0-9]"))) << "a negative figure in:\n" << r.output;
}

}  // namespace
