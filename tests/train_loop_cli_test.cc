// The one epoch loop of `onnxtrain train` (tools/train_epochs.h) keeps its promises for every strategy, as
// a user sees them from the command line: SIGINT stops with a checkpoint (exit 130) and --resume appends
// to --metrics, so the file holds every step once; processes of one run started with other options are
// refused at rendezvous, and one-process strategies under a launcher are refused; what would turn the
// weights into NaN (a non-finite input row, a NaN in the model) is refused before the first step; a
// metrics file that cannot be written is an error, not a short file.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/importer.h"
#include "frontend/model_writer.h"
#include "frontend/npy.h"
#include "tests/cli_processes.h"
#include "tests/cli_run.h"
#include "tests/free_port.h"

namespace onnxtrain {
namespace {

namespace fs = std::filesystem;
using testing_support::CliRun;
using testing_support::read_bytes;

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";
// 3 epochs of 36 steps of 32 (1280 rows, 128 held out).
const std::string kTrainArgs = "train " + kModels +
                               "cnn_opset17.onnx --data synthetic:1,28,28:10:1280 --batch 32 "
                               "--epochs 3 --seed 5 --lr 0.01 --test-data none";

CliRun run(const std::string& args) { return testing_support::run_cli(args); }
fs::path scratch(const std::string& name) { return testing_support::scratch_dir("onnxtrain_train_loop", name); }

// The "step" of every step line of a --metrics file, in file order.
std::vector<int64_t> metric_steps(const fs::path& file) {
  std::vector<int64_t> steps;
  std::istringstream lines(read_bytes(file));
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("step")) steps.push_back(j["step"].get<int64_t>());
  }
  return steps;
}

// dp is driven step by step (stops after the step in flight), a pipeline in chunks of --checkpoint-every
// (stops where the chunk drains): both write a checkpoint at the stop, and the resumed run's metrics
// continue the file.
TEST(TrainLoopCli, EveryStrategyStopsOnSigintWithACheckpointAndResumesWithWholeMetrics) {
  for (const std::string strategy : {"--strategy dp --replicas 2", "--strategy pipedream --stages 2"}) {
    SCOPED_TRACE(strategy);
    const fs::path dir = scratch(strategy.substr(11, 2));
    const std::string args = kTrainArgs + " " + strategy + " --checkpoint-dir " + (dir / "ckpt").string() +
                             " --checkpoint-every 10 --metrics " + (dir / "m.jsonl").string() + " -o " +
                             (dir / "model.onnx").string();
    const pid_t pid = testing_support::start(args, dir / "first.log");
    ASSERT_TRUE(testing_support::wait_for_checkpoint(dir / "ckpt", 20, pid)) << read_bytes(dir / "first.log");
    ASSERT_EQ(kill(pid, SIGINT), 0);
    EXPECT_EQ(testing_support::wait_exit_code(pid), 130) << read_bytes(dir / "first.log");
    const std::string log = read_bytes(dir / "first.log");
    EXPECT_NE(log.find("Continue with the same command and --checkpoint-dir"), std::string::npos) << log;
    EXPECT_FALSE(fs::exists(dir / "model.onnx"));
    const std::vector<int64_t> before = metric_steps(dir / "m.jsonl");
    ASSERT_FALSE(before.empty());
    EXPECT_LT(before.back(), 108);

    const CliRun r = run(args + " --resume");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::vector<int64_t> steps = metric_steps(dir / "m.jsonl");
    ASSERT_EQ(steps.size(), 108u) << "the resumed run's metrics do not continue the interrupted run's";
    for (size_t i = 0; i < steps.size(); ++i) ASSERT_EQ(steps[i], static_cast<int64_t>(i) + 1);
    // Every strategy's step lines carry the learning rate; epochs count from 1 as on the console (36 steps
    // each); every line has a wall_time of now, in file order.
    EXPECT_NE(read_bytes(dir / "m.jsonl").find("\"lr\":0.01"), std::string::npos);
    std::istringstream lines(read_bytes(dir / "m.jsonl"));
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    double last_wall_time = 0;
    std::vector<int64_t> validation_epochs;
    for (std::string line; std::getline(lines, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      ASSERT_TRUE(j.contains("wall_time")) << line;
      const double wall_time = j["wall_time"];
      EXPECT_TRUE(wall_time >= last_wall_time && wall_time <= now && wall_time > now - 600) << line;
      last_wall_time = wall_time;
      if (j.contains("step")) EXPECT_EQ(j["epoch"].get<int64_t>(), (j["step"].get<int64_t>() - 1) / 36 + 1) << line;
      if (j.contains("val_loss")) validation_epochs.push_back(j["epoch"]);
    }
    EXPECT_EQ(validation_epochs, (std::vector<int64_t>{1, 2, 3}));
  }
}

TEST(TrainLoopCli, CentralStorageStopsOnSigintAndSaysThatItWritesNoCheckpoint) {
  const fs::path dir = scratch("cs");
  const std::string args = "train " + kModels +
                           "cnn_opset17.onnx --data synthetic:1,28,28:10:64000 --batch 32 "
                           "--test-data none --strategy dp --replicas 2 --central-storage --log-every 1 -o " +
                           (dir / "model.onnx").string();
  const pid_t pid = testing_support::start(args, dir / "log");
  for (int i = 0; i < 6000 && read_bytes(dir / "log").find("step 2/") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(kill(pid, SIGINT), 0);
  EXPECT_EQ(testing_support::wait_exit_code(pid), 130) << read_bytes(dir / "log");
  EXPECT_NE(read_bytes(dir / "log").find("writes no checkpoints yet"), std::string::npos) << read_bytes(dir / "log");
  EXPECT_FALSE(fs::exists(dir / "model.onnx"));
}

// SIGINT during a validation pass waited for the pass to end; in the last epoch it was ignored and the
// run wrote its model with exit 0 (a fifth outside check: 24 s for a 54,000-row pass). The pass now
// stops between chunks of batches with the checkpoint and exit code of a stop between steps.
TEST(TrainLoopCli, SigintDuringValidationStopsWithACheckpoint) {
  const fs::path dir = scratch("validation");
  const std::string args = "train " + kModels +
                           "cnn_opset17.onnx --data synthetic:1,28,28:10:64000 --validation 0.95 --batch 32 "
                           "--limit-batches 2 --epochs 1 --test-data none --log-every 1 --checkpoint-dir " +
                           (dir / "ckpt").string() + " -o " + (dir / "model.onnx").string();
  const pid_t pid = testing_support::start(args, dir / "log");
  for (int i = 0; i < 6000 && read_bytes(dir / "log").find("step 2/2") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(kill(pid, SIGINT), 0);
  EXPECT_EQ(testing_support::wait_exit_code(pid), 130) << read_bytes(dir / "log");
  const std::string log = read_bytes(dir / "log");
  EXPECT_NE(log.find("stopped after step 2; checkpoint"), std::string::npos) << log;
  EXPECT_EQ(log.find("validation loss"), std::string::npos) << "the 60,800-row pass ran to its end: " << log;
  EXPECT_FALSE(fs::exists(dir / "model.onnx"));
}

// A second signal stops at once without a checkpoint; it ended the run by the signal's default action,
// without a word (a fifth outside check). The process is held (SIGSTOP) while SIGINT and SIGTERM arrive, so
// that both are pending together; either may reach a thread first, and the other stops the run.
TEST(TrainLoopCli, ASecondSignalStopsAtOnceAndSaysSo) {
  const fs::path dir = scratch("second");
  const std::string args = "train " + kModels +
                           "cnn_opset17.onnx --data synthetic:1,28,28:10:64000 --batch 32 --test-data none "
                           "--log-every 1 --checkpoint-dir " +
                           (dir / "ckpt").string() + " -o " + (dir / "model.onnx").string();
  const pid_t pid = testing_support::start(args, dir / "log");
  for (int i = 0; i < 6000 && read_bytes(dir / "log").find("step 2/") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  ASSERT_EQ(kill(pid, SIGINT), 0);
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  ASSERT_EQ(kill(pid, SIGCONT), 0);
  const int code = testing_support::wait_exit_code(pid);
  const std::string log = read_bytes(dir / "log");
  EXPECT_TRUE(code == 128 + SIGTERM || code == 128 + SIGINT) << code << ": " << log;
  EXPECT_NE(log.find(code == 128 + SIGINT ? "onnxtrain: SIGINT again: stopped at once, without a checkpoint"
                                          : "onnxtrain: SIGTERM after a stop was asked: stopped at once, without a "
                                            "checkpoint"),
            std::string::npos)
      << log;
  EXPECT_FALSE(fs::exists(dir / "ckpt")) << "it wrote a checkpoint";
  EXPECT_FALSE(fs::exists(dir / "model.onnx"));
}

TEST(TrainLoopCli, RanksStartedWithOtherOptionsAreRefusedAtRendezvous) {
  const fs::path dir = scratch("options");
  const int port = testing_support::free_loopback_port();
  const std::string base = "train " + kModels +
                           "cnn_opset17.onnx --data synthetic:1,28,28:10:96 --batch 12 "
                           "--test-data none --strategy dp --comm-timeout 60 -o " +
                           (dir / "m.onnx").string();
  const auto started = std::chrono::steady_clock::now();
  const pid_t rank0 = testing_support::start_torchrun_rank(0, 2, port, base + " --lr 0.05", dir / "rank0.log");
  const pid_t rank1 = testing_support::start_torchrun_rank(1, 2, port, base + " --lr 0.1", dir / "rank1.log");
  EXPECT_EQ(testing_support::wait_exit_code(rank1), 1) << read_bytes(dir / "rank1.log");
  EXPECT_EQ(testing_support::wait_exit_code(rank0), 1) << read_bytes(dir / "rank0.log");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(seconds, 30) << "a mismatch must not wait for --comm-timeout";
  EXPECT_NE(read_bytes(dir / "rank1.log").find("rank 1 was started with --lr 0.1, but rank 0 has --lr 0.05"),
            std::string::npos)
      << read_bytes(dir / "rank1.log");
  EXPECT_NE(read_bytes(dir / "rank0.log").find("rank 1 was started with --lr 0.1"), std::string::npos)
      << read_bytes(dir / "rank0.log");
  EXPECT_FALSE(fs::exists(dir / "m.onnx"));
  // Options that change only one rank's gradients or rows were not compared: ranks of another
  // --label-smoothing or --augment trained one model without a word (an outside check).
  for (const std::string option : {"--label-smoothing 0.1", "--augment flip", "--accumulate 2"}) {
    const int other_port = testing_support::free_loopback_port();
    const pid_t first = testing_support::start_torchrun_rank(0, 2, other_port, base, dir / "rank0.log");
    const pid_t second = testing_support::start_torchrun_rank(1, 2, other_port, base + " " + option, dir / "rank1.log");
    EXPECT_EQ(testing_support::wait_exit_code(second), 1) << option << ": " << read_bytes(dir / "rank1.log");
    EXPECT_EQ(testing_support::wait_exit_code(first), 1) << option << ": " << read_bytes(dir / "rank0.log");
    const std::string flag = option.substr(0, option.find(' '));
    EXPECT_NE(read_bytes(dir / "rank1.log").find("rank 1 was started with " + flag), std::string::npos)
        << read_bytes(dir / "rank1.log");
    EXPECT_FALSE(fs::exists(dir / "m.onnx"));
  }
}

TEST(TrainLoopCli, OneProcessStrategiesUnderALauncherAreRefused) {
  const fs::path dir = scratch("launcher");
  for (const std::string strategy : {"", " --strategy ps --replicas 2"}) {
    const pid_t rank = testing_support::start_torchrun_rank(
        0, 2, 29500, kTrainArgs + strategy + " -o " + (dir / "m.onnx").string(), dir / "log");
    EXPECT_EQ(testing_support::wait_exit_code(rank), 1) << read_bytes(dir / "log");
    EXPECT_NE(read_bytes(dir / "log").find("started as 2 processes (torchrun)"), std::string::npos)
        << read_bytes(dir / "log");
  }
}

TEST(TrainLoopCli, ANonFiniteInputRowIsRefusedOnLoadNamingTheRow) {
  const fs::path dir = scratch("nan_row");
  Tensor x(DType::Float32, {16, 1, 28, 28});
  for (float& v : x.data<float>()) v = 0.5f;
  x.data<float>()[7 * 784 + 3] = std::numeric_limits<float>::quiet_NaN();
  Tensor y(DType::Int64, {16});
  for (int64_t i = 0; i < 16; ++i) y.data<int64_t>()[i] = i % 10;
  write_npy((dir / "x.npy").string(), x);
  write_npy((dir / "y.npy").string(), y);
  const CliRun r = run("train " + kModels + "cnn_opset17.onnx --data npy:" + (dir / "x.npy").string() + "," +
                       (dir / "y.npy").string() + " --batch 4 -o " + (dir / "m.onnx").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("x.npy"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("row 7 of the inputs holds NaN (element 3 of the row"), std::string::npos) << r.output;
}

// A NaN in the model itself is the file's fault, not the learning rate's: refused before the first step.
TEST(TrainLoopCli, AModelHoldingNaNIsRefusedBeforeTraining) {
  const fs::path dir = scratch("nan_model");
  const ImportedModel model = import_model(kModels + "mlp_opset17.onnx");
  std::map<std::string, Tensor> initializers;
  for (ValueId id : model.graph.initializers) {
    const Value& v = model.graph.value(id);
    if (!v.data || v.dtype != DType::Float32 || v.data->numel() < 2) continue;
    Tensor broken = v.data->clone();
    broken.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
    initializers[v.name] = broken;
    break;
  }
  ASSERT_EQ(initializers.size(), 1u);
  write_trained_model(kModels + "mlp_opset17.onnx", (dir / "nan.onnx").string(), initializers);
  for (const std::string strategy : {"", " --strategy gpipe --stages 2 --micro-batches 2"}) {
    const CliRun r = run("train " + (dir / "nan.onnx").string() + " --data synthetic:1,28,28:10:64 --batch 16" +
                         strategy + " -o " + (dir / "m.onnx").string());
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("the model's initial '" + initializers.begin()->first + "' holds 1 of"), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << r.output;
  }
}

// One row of finite but huge values (3e38) overflows the forward pass to a NaN/inf loss in the one batch
// that holds it. --on-nonfinite stop ends the run there; skip skips that step alone (single and dp: the
// replicas see the same combined gradients), and the model written is finite.
TEST(TrainLoopCli, OnNonfiniteSkipSkipsTheOverflowingStepAndStopStopsAtIt) {
  const fs::path dir = scratch("skip");
  Tensor x(DType::Float32, {64, 1, 28, 28});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 7919) % 255) / 255.0f;
  for (int64_t k = 0; k < 784; ++k) x.data<float>()[5 * 784 + k] = 3e38f;
  Tensor y(DType::Int64, {64});
  for (int64_t i = 0; i < 64; ++i) y.data<int64_t>()[i] = i % 10;
  write_npy((dir / "x.npy").string(), x);
  write_npy((dir / "y.npy").string(), y);
  const std::string args = "train " + kModels + "mlp_opset17.onnx --data npy:" + (dir / "x.npy").string() + "," +
                           (dir / "y.npy").string() +
                           " --normalize none --validation 0 --test-data none --batch 8 "
                           "--epochs 2 --lr 0.01 -o " +
                           (dir / "m.onnx").string();
  CliRun r = run(args);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the loss became"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "m.onnx"));
  for (const std::string strategy : {"", " --strategy dp --replicas 2"}) {
    SCOPED_TRACE(strategy);
    r = run(args + strategy + " --on-nonfinite skip");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("the step is skipped (--on-nonfinite skip)"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("2 steps skipped for a NaN or infinite loss or gradient"), std::string::npos) << r.output;
    EXPECT_TRUE(fs::exists(dir / "m.onnx"));
    fs::remove(dir / "m.onnx");
  }
  r = run(args + " --strategy pipedream --stages 2 --on-nonfinite skip");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--on-nonfinite skip works with --strategy single and dp"), std::string::npos) << r.output;
}

TEST(TrainLoopCli, ACheckpointDirectoryThatCannotTakeCheckpointsIsRefusedBeforeTheFirstStep) {
  const fs::path dir = scratch("ckpt_dir");
  std::ofstream(dir / "file") << "not a folder";
  const std::string args = "train " + kModels +
                           "mlp_opset17.onnx --data synthetic:1,28,28:10:64 --batch 16 "
                           "--checkpoint-every 2 -o " +
                           (dir / "m.onnx").string();
  CliRun r = run(args + " --checkpoint-dir " + (dir / "file").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--checkpoint-dir " + (dir / "file").string() + ": is not a folder"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << r.output;
  r = run(args + " --checkpoint-dir " + (dir / "file" / "below").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.find("step 1/"), std::string::npos) << r.output;
}

TEST(TrainLoopCli, AMetricsFileThatCannotBeWrittenIsAnError) {
  const fs::path dir = scratch("metrics");
  // /dev/full takes the open and fails every write with ENOSPC, as a full disk does.
  const CliRun r = run("train " + kModels +
                       "mlp_opset17.onnx --data synthetic:1,28,28:10:64 --batch 16 "
                       "--metrics /dev/full -o " +
                       (dir / "m.onnx").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("/dev/full: writing the metrics file failed: No space left on device"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir / "m.onnx"));
}

// --patience: with an lr too small to move a float32 weight the validation loss never gets lower, so the
// run stops two epochs after the first, under one device and a pipeline alike (the one epoch loop);
// --save-best wrote the first epoch's model once. Both need validation rows.
TEST(TrainLoopCli, PatienceStopsWhenTheValidationLossStopsImprovingAndSaveBestKeepsTheBest) {
  for (const std::string strategy : {"", " --strategy pipedream --stages 2"}) {
    SCOPED_TRACE(strategy);
    const fs::path dir = scratch("patience");
    const std::string base = "train " + kModels +
                             "mlp_opset17.onnx --data synthetic:1,28,28:10:256 --test-data none --batch 64 "
                             "--epochs 6 --optimizer sgd --lr 1e-30 --patience 2 --save-best " +
                             (dir / "best.onnx").string() + strategy + " -o " + (dir / "m.onnx").string();
    const CliRun r = run(base);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("early stop after epoch 3: no lower validation loss for 2 epochs"), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("epoch 4:"), std::string::npos) << r.output;
    size_t writes = 0;
    for (size_t at = 0; (at = r.output.find("the lowest validation loss so far", at)) != std::string::npos; ++at)
      ++writes;
    EXPECT_EQ(writes, 1u) << r.output;
    EXPECT_NE(r.output.find("epoch 1: the lowest validation loss so far; wrote"), std::string::npos) << r.output;
    EXPECT_TRUE(fs::exists(dir / "best.onnx"));
    EXPECT_TRUE(fs::exists(dir / "m.onnx"));
  }
  const CliRun r =
      run("train " + kModels + "mlp_opset17.onnx --data synthetic:1,28,28:10:256 --validation 0 --patience 2 -o " +
          (scratch("patience") / "m.onnx").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("keep --validation above 0"), std::string::npos) << r.output;
}

// --patience over processes: rank 0 evaluates and decides, and every rank stops after the same epoch (a
// rank that went on would wait for its peers until --comm-timeout); both exit 0 and rank 0 writes the model.
TEST(TrainLoopCli, PatienceStopsEveryProcessAfterTheSameEpoch) {
  for (const std::string strategy : {"--strategy dp", "--strategy pipedream --stages 2"}) {
    SCOPED_TRACE(strategy);
    const fs::path dir = scratch("patience_ranks");
    const int port = 20000 + static_cast<int>((getpid() + 104729 + strategy.size()) % 20000);
    const std::string args = "train " + kModels +
                             "mlp_opset17.onnx --data synthetic:1,28,28:10:256 --test-data none --batch 64 "
                             "--epochs 6 --optimizer sgd --lr 1e-30 --patience 2 --comm-timeout 60 " +
                             strategy + " -o " + (dir / "m.onnx").string();
    const auto started = std::chrono::steady_clock::now();
    const pid_t rank0 = testing_support::start_torchrun_rank(0, 2, port, args, dir / "rank0.log");
    const pid_t rank1 = testing_support::start_torchrun_rank(1, 2, port, args, dir / "rank1.log");
    EXPECT_EQ(testing_support::wait_exit_code(rank1), 0) << read_bytes(dir / "rank1.log");
    EXPECT_EQ(testing_support::wait_exit_code(rank0), 0) << read_bytes(dir / "rank0.log");
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 50);
    const std::string log = read_bytes(dir / "rank0.log");
    EXPECT_NE(log.find("early stop after epoch 3: no lower validation loss for 2 epochs"), std::string::npos) << log;
    EXPECT_EQ(log.find("epoch 4:"), std::string::npos) << log;
    EXPECT_TRUE(fs::exists(dir / "m.onnx"));
  }
}

// A run that learns writes --save-best at each epoch whose validation loss is the lowest so far: at least
// at the first, and the file is a model that `eval` scores.
TEST(TrainLoopCli, SaveBestWritesAModelThatEvalScores) {
  const fs::path dir = scratch("save_best");
  const CliRun r =
      run(kTrainArgs + " --save-best " + (dir / "best.onnx").string() + " -o " + (dir / "m.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("epoch 1: the lowest validation loss so far"), std::string::npos) << r.output;
  const CliRun e = run("eval " + (dir / "best.onnx").string() + " --data synthetic:1,28,28:10:1280");
  EXPECT_EQ(e.exit_code, 0) << e.output;
  EXPECT_NE(e.output.find("eval: loss"), std::string::npos) << e.output;
}

}  // namespace
}  // namespace onnxtrain
