// `onnxtrain train` as a user runs it, across processes: the same seed gives the same model bit for
// bit; a run killed with SIGKILL and resumed from its last checkpoint, or stopped by SIGINT and resumed,
// ends with exactly the model of an uninterrupted run; damaged checkpoints and changed options are
// refused; --dump-gradients writes what the first step applies.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "executor/checkpoint.h"
#include "frontend/importer.h"
#include "frontend/npy.h"
#include "tests/cli_processes.h"
#include "tests/cli_run.h"
#include "tests/free_port.h"

namespace onnxtrain {
namespace {

namespace fs = std::filesystem;

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";
// 3 epochs of 36 steps of 32 (1280 rows, 128 held out): long enough to be interrupted mid-way.
std::string train_args(int epochs = 3, const std::string& lr = "0.002") {
  return "train " + kModels + "cnn_opset17.onnx --data synthetic:1,28,28:10:1280 --batch 32 --epochs " +
         std::to_string(epochs) + " --seed 5 --optimizer adamw --lr " + lr + " --schedule cosine --test-data none";
}
const std::string kTrainArgs = train_args();
// tools/quickstart.sh trains with these.
const std::string kQuickStartOptions =
    "--data fashion-mnist --epochs 3 --batch 32 --optimizer nesterov --lr 0.04 --schedule cosine --weight-decay 0.0005 "
    "--validation 0";

using onnxtrain::testing_support::CliRun;
using onnxtrain::testing_support::read_bytes;
using onnxtrain::testing_support::start;
using onnxtrain::testing_support::start_torchrun_rank;
using onnxtrain::testing_support::wait_exit_code;
using onnxtrain::testing_support::wait_for_checkpoint;
CliRun run(const std::string& args) { return onnxtrain::testing_support::run_cli(args); }
fs::path scratch(const std::string& name) {
  return onnxtrain::testing_support::scratch_dir("onnxtrain_train_cli", name);
}

// The model an uninterrupted run of kTrainArgs writes (trained once per test binary).
const std::string& uninterrupted_model() {
  static const std::string bytes = [] {
    const fs::path dir = scratch("uninterrupted");
    const CliRun r = run(kTrainArgs + " -o " + (dir / "model.onnx").string());
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return read_bytes(dir / "model.onnx");
  }();
  return bytes;
}

TEST(TrainCli, TheSameSeedGivesTheSameModelBitForBit) {
  const fs::path dir = scratch("seed");
  ASSERT_FALSE(uninterrupted_model().empty());
  CliRun r = run(kTrainArgs + " -o " + (dir / "again.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(read_bytes(dir / "again.onnx") == uninterrupted_model()) << "two runs with seed 5 differ";
  std::string other = kTrainArgs;
  other.replace(other.find("--seed 5"), 8, "--seed 6");
  r = run(other + " -o " + (dir / "other.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(read_bytes(dir / "other.onnx") == uninterrupted_model()) << "seed 6 trained the same model as seed 5";
}

// Runs kTrainArgs with checkpoints into DIR/ckpt every `every` steps, sends `signal` once a checkpoint
// of `after_step` exists, and returns the wait status; then resumes and checks the resumed run writes
// exactly the uninterrupted model.
int interrupt_and_resume(const fs::path& dir, int every, int after_step, int signal) {
  const std::string args = kTrainArgs + " --checkpoint-dir " + (dir / "ckpt").string() + " --checkpoint-every " +
                           std::to_string(every) + " -o " + (dir / "model.onnx").string();
  const pid_t pid = start(args, dir / "first.log");
  int status = 0;
  if (!wait_for_checkpoint(dir / "ckpt", after_step, pid)) {
    ADD_FAILURE() << "the run ended before it could be interrupted:\n" << read_bytes(dir / "first.log");
    return status;
  }
  EXPECT_EQ(kill(pid, signal), 0);
  waitpid(pid, &status, 0);
  EXPECT_FALSE(fs::exists(dir / "model.onnx")) << "the interrupted run wrote its model";

  const CliRun r = run(args + " --resume");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_TRUE(read_bytes(dir / "model.onnx") == uninterrupted_model()) << "the resumed run ended elsewhere";
  return status;
}

TEST(TrainCli, AKilledRunResumesToExactlyTheUninterruptedModel) {
  const fs::path dir = scratch("kill");
  const int status = interrupt_and_resume(dir, 4, 40, SIGKILL);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << read_bytes(dir / "first.log");
}

TEST(TrainCli, SigintWritesACheckpointAndTheRunResumesExactly) {
  const fs::path dir = scratch("sigint");
  const int status = interrupt_and_resume(dir, 10, 20, SIGINT);
  const std::string log = read_bytes(dir / "first.log");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << log;
  EXPECT_NE(log.find("--resume"), std::string::npos) << log;
}

TEST(TrainCli, DamagedCheckpointsAndChangedOptionsAreRefused) {
  const fs::path dir = scratch("refuse");
  const std::string ckpt =
      " --checkpoint-dir " + (dir / "ckpt").string() + " --checkpoint-every 10 -o " + (dir / "m.onnx").string();
  CliRun r = run(train_args(1) + ckpt);
  ASSERT_EQ(r.exit_code, 0) << r.output;

  r = run(train_args(1) + ckpt);  // a fresh run into a directory that holds checkpoints
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--resume"), std::string::npos) << r.output;

  r = run(train_args(1, "0.1") + ckpt + " --resume");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("lr is 0.002 there, 0.1 here"), std::string::npos) << r.output;

  r = run(train_args(1) + " --resume --checkpoint-dir " + (dir / "empty").string() + " -o " +
          (dir / "m.onnx").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no checkpoint"), std::string::npos) << r.output;

  const fs::path file = dir / "ckpt" / "checkpoint-00000030.otck";
  ASSERT_TRUE(fs::exists(file));
  std::string bytes = read_bytes(file);
  bytes[bytes.size() - 100] ^= 0x40;  // inside the last tensor's data
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  r = run(train_args(1) + ckpt + " --resume");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("checkpoint-00000030.otck"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("checksum"), std::string::npos) << r.output;
  // ... naming the newest intact one, which --resume-from continues from; the damaged one is set aside.
  const fs::path older = dir / "ckpt" / "checkpoint-00000020.otck";
  EXPECT_NE(r.output.find("--resume-from " + older.string()), std::string::npos) << r.output;
  r = run(train_args(1) + ckpt + " --resume-from " + older.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from " + older.string()), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(file.string() + ".superseded")) << r.output;
  r = run(train_args(1) + ckpt + " --resume");  // the newest is now the resumed run's own, intact
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// With plain SGD at lr 1, the first step subtracts exactly the dumped gradient.
TEST(TrainCli, DumpedGradientsAreWhatTheFirstStepApplies) {
  const fs::path dir = scratch("dump");
  const CliRun r = run("train " + kModels +
                       "mlp_opset17.onnx --data synthetic:1,28,28:10:64 --batch 16 --validation 0 "
                       "--limit-batches 1 --optimizer sgd --lr 1 --test-data none --dump-gradients " +
                       (dir / "grads").string() + " -o " + (dir / "m.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const ImportedModel before = import_model(kModels + "mlp_opset17.onnx"),
                      after = import_model((dir / "m.onnx").string());
  int compared = 0;
  for (ValueId id : before.graph.initializers) {
    const Value& v = before.graph.value(id);
    if (v.role != ValueRole::Parameter) continue;
    const fs::path file = dir / "grads" / (v.name + ".npy");
    ASSERT_TRUE(fs::exists(file)) << file;
    const Tensor g = read_npy(file.string());
    const Tensor& w1 = *after.graph.value(*after.graph.find_value(v.name)).data;
    ASSERT_EQ(g.sizes(), v.data->sizes()) << v.name;
    auto w0s = v.data->data<float>(), w1s = w1.data<float>(), gs = g.data<float>();
    for (size_t i = 0; i < gs.size(); ++i) ASSERT_NEAR(w0s[i] - w1s[i], gs[i], 1e-6 + 1e-5 * std::abs(gs[i])) << v.name;
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

// Largest |a − b| over max|a| across the trained parameters of two written models.
double parameter_distance(const fs::path& a, const fs::path& b) {
  const ImportedModel ma = import_model(a.string()), mb = import_model(b.string());
  double worst = 0;
  for (ValueId id : ma.graph.initializers) {
    const Value& v = ma.graph.value(id);
    if (v.role != ValueRole::Parameter) continue;
    auto x = v.data->data<float>(), y = mb.graph.value(*mb.graph.find_value(v.name)).data->data<float>();
    double scale = 0, diff = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      scale = std::max(scale, static_cast<double>(std::abs(x[i])));
      diff = std::max(diff, static_cast<double>(std::abs(x[i] - y[i])));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

// `--strategy dp --replicas 2` and `--strategy gpipe --stages 2 --micro-batches 2` train what one device
// trains on the whole mini-batch (BN-free model; up to summation order); the asynchronous strategies run
// and print their per-stage report.
TEST(TrainCli, DataParallelAndGPipeRunsTrainWhatOneDeviceTrains) {
  const fs::path dir = scratch("strategies");
  const std::string base = "train " + kModels +
                           "mlp_opset17.onnx --data synthetic:1,28,28:10:512 --batch 16 "
                           "--validation 0 --test-data none --lr 0.05 --seed 3";
  CliRun r = run(base + " -o " + (dir / "single.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run(base + " --strategy dp --replicas 2 -o " + (dir / "dp.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_LT(parameter_distance(dir / "single.onnx", dir / "dp.onnx"), 1e-4);
  r = run(base + " --strategy gpipe --stages 2 --micro-batches 2 -o " + (dir / "gpipe.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_LT(parameter_distance(dir / "single.onnx", dir / "gpipe.onnx"), 1e-4);
  // SpecTrain split where stage 0 has weights to predict: its own plan for this MLP puts only the Flatten on
  // stage 0 (its predictions cost more than the second stage gains: 75-90k samples/s against 32-37k for the
  // cuts after fc1, measured 2026-12-07).
  const std::string plan = (dir / "spectrain_plan.json").string();
  r = run("partition " + kModels + "mlp_opset17.onnx --stages 2 --batch 16 --strategy spectrain --split 2 -o " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run(base + " --strategy spectrain --stages 2 --plan " + plan + " -o " + (dir / "spectrain.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Stage 0's prediction error, the report's last column: the prediction lands nearer to the version each
  // pass aimed at than the unpredicted weights (1); stage 1 predicts nothing (nan).
  const size_t header = r.output.find("pred.error");
  ASSERT_NE(header, std::string::npos) << r.output;
  const size_t row = r.output.find("\n    0  ", header);
  ASSERT_NE(row, std::string::npos) << r.output;
  const std::string line = r.output.substr(row + 1, r.output.find('\n', row + 1) - row - 1);
  const double error = std::stod(line.substr(line.find_last_of(' ') + 1));
  EXPECT_GT(error, 0) << line;
  EXPECT_LT(error, 1) << line;
  EXPECT_NE(r.output.find("nan: the stage predicts\n  nothing"), std::string::npos) << "the legend says why:\n"
                                                                                    << r.output;
  r = run(base + " --strategy spectrain --stages 2 --plan " + plan + " --prediction-metrics off -o " +
          (dir / "quiet.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(parameter_distance(dir / "spectrain.onnx", dir / "quiet.onnx"), 0) << "scoring changes no number";
}

// Sharded checkpoints of pipeline and data-parallel runs: a pipeline run stopped after one epoch and
// resumed for a second writes the two-epoch run's exact bytes (checkpoints are taken with the pipeline
// drained every --checkpoint-every mini-batches, the same in both runs); and a checkpoint of one layout
// resumes under others: 2 pipedream stages → one device and 3 stages, 2 replicas → 2 stages, and a gpipe
// checkpoint → one device, 1f1b over 3 stages and 2 replicas, which train the uninterrupted gpipe model up
// to summation order (the synchronous strategies compute the same steps; pipedream's are stale).
TEST(TrainCli, ShardedCheckpointsResumeExactlyAndUnderOtherLayouts) {
  const fs::path dir = scratch("sharded");
  const std::string base = "train " + kModels +
                           "mlp_opset17.onnx --data synthetic:1,28,28:10:256 --batch 16 "
                           "--validation 0 --test-data none --lr 0.05 --seed 3 --checkpoint-every 4";
  const std::string pipeline = base + " --strategy pipedream --stages 2";
  auto ckpt = [&](const std::string& name) { return " --checkpoint-dir " + (dir / name).string(); };
  CliRun r = run(pipeline + " --epochs 2" + ckpt("whole") + " -o " + (dir / "whole.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run(pipeline + " --epochs 1" + ckpt("half") + " -o " + (dir / "half.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(fs::exists(dir / "half" / "checkpoint-00000016.otck.shards" / "rank-00001.otck"));
  fs::copy(dir / "half", dir / "half-copy", fs::copy_options::recursive);
  fs::copy(dir / "half", dir / "half-copy2", fs::copy_options::recursive);
  r = run(pipeline + " --epochs 2 --resume" + ckpt("half") + " -o " + (dir / "resumed.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(step 16, 2 shards)"), std::string::npos) << r.output;
  EXPECT_TRUE(read_bytes(dir / "resumed.onnx") == read_bytes(dir / "whole.onnx"))
      << "the resumed pipeline ended elsewhere";

  r = run(base + " --epochs 2 --resume" + ckpt("half-copy") + " -o " + (dir / "single.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  // One device continues where the pipedream pipeline stopped (no staleness, so not the same model): it ends nearer
  // the two-epoch pipeline model than the one-epoch model it started from.
  EXPECT_LT(parameter_distance(dir / "whole.onnx", dir / "single.onnx"),
            parameter_distance(dir / "whole.onnx", dir / "half.onnx"));
  r = run(base + " --strategy pipedream --stages 3 --epochs 2 --resume" + ckpt("half-copy2") + " -o " +
          (dir / "three.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step 32/32"), std::string::npos) << r.output;

  r = run(base + " --strategy dp --replicas 2 --epochs 1" + ckpt("dp") + " -o " + (dir / "dp1.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run(pipeline + " --epochs 2 --resume" + ckpt("dp") + " -o " + (dir / "dp-to-pipeline.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(step 16, 2 shards)"), std::string::npos) << r.output;

  // Synchronous layouts compute the same steps, so a gpipe checkpoint resumed on one device, as 1f1b over
  // 3 stages or as 2 data-parallel replicas ends at the uninterrupted gpipe model, up to summation order.
  const std::string gpipe = base + " --strategy gpipe --stages 2 --micro-batches 2";
  r = run(gpipe + " --epochs 2" + ckpt("gpipe-whole") + " -o " + (dir / "gpipe-whole.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run(gpipe + " --epochs 1" + ckpt("gpipe") + " -o " + (dir / "gpipe-half.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const double moved = parameter_distance(dir / "gpipe-whole.onnx", dir / "gpipe-half.onnx");
  int layout = 0;
  for (const std::string& other : {std::string(""), std::string(" --strategy 1f1b --stages 3 --micro-batches 2"),
                                   std::string(" --strategy dp --replicas 2")}) {
    const std::string name = "gpipe-" + std::to_string(layout++);
    fs::copy(dir / "gpipe", dir / name, fs::copy_options::recursive);
    r = run(base + other + " --epochs 2 --resume" + ckpt(name) + " -o " + (dir / (name + ".onnx")).string());
    ASSERT_EQ(r.exit_code, 0) << other << "\n" << r.output;
    EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
    EXPECT_LT(parameter_distance(dir / "gpipe-whole.onnx", dir / (name + ".onnx")), 1e-3 * moved) << other;
  }
}

// SpecTrain with an optimizer whose state holds no gradient estimate (sgd) predicts from an average it
// keeps itself: the checkpoint carries it (section "predictor"), so a resumed run predicts what the
// uninterrupted one did and ends at the same model, bit for bit. Without it the resumed run restarted
// the average (and, before 2026-12-02, crashed on its first prediction).
TEST(TrainCli, SpecTrainResumesExactlyWithItsKeptGradientAverage) {
  const fs::path dir = scratch("spectrain-resume");
  const std::string base = "train " + kModels +
                           "mlp_opset17.onnx --data synthetic:1,28,28:10:256 --batch 16 "
                           "--validation 0 --test-data none --lr 0.05 --seed 3 --checkpoint-every 4 "
                           "--strategy spectrain --stages 2 --optimizer sgd";
  auto ckpt = [&](const std::string& name) { return " --checkpoint-dir " + (dir / name).string(); };
  CliRun r = run(base + " --epochs 2" + ckpt("whole") + " -o " + (dir / "whole.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run(base + " --epochs 1" + ckpt("half") + " -o " + (dir / "half.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const TrainingCheckpoint saved = read_checkpoint((dir / "half" / "checkpoint-00000016.otck").string());
  EXPECT_FALSE(saved.predictor_state.empty()) << "the checkpoint has no kept gradient averages";
  r = run(base + " --epochs 2 --resume" + ckpt("half") + " -o " + (dir / "resumed.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  EXPECT_TRUE(read_bytes(dir / "resumed.onnx") == read_bytes(dir / "whole.onnx"))
      << "the resumed spectrain run ended elsewhere";
  // One device resumes from it too (the predictor's section is not an optimizer state).
  r = run("train " + kModels +
          "mlp_opset17.onnx --data synthetic:1,28,28:10:256 --batch 16 --validation 0 "
          "--test-data none --lr 0.05 --seed 3 --checkpoint-every 4 --optimizer sgd --epochs 2 --resume" +
          ckpt("half") + " -o " + (dir / "single.onnx").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// torchrun-style processes (TCP backend): data parallelism over 2 processes writes the bytes of 2 replica
// threads; a rank killed mid-run makes the other stop at once, naming the dead rank and the step.
TEST(TrainCli, TorchrunStyleProcessesTrainLikeThreadsAndStopWhenARankDies) {
  const fs::path dir = scratch("torchrun");
  const int port = testing_support::free_loopback_port();
  const std::string base = "train " + kModels +
                           "cnn_opset17.onnx --data synthetic:1,28,28:10:96 --batch 12 "
                           "--validation 0 --test-data none --seed 5 --epochs 2 --strategy dp";
  setenv("OMP_NUM_THREADS", "2", 1);
  const CliRun threads = run(base + " --replicas 2 -o " + (dir / "threads.onnx").string());
  ASSERT_EQ(threads.exit_code, 0) << threads.output;
  std::vector<pid_t> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(start_torchrun_rank(r, 2, port, base + " -o " + (dir / "procs.onnx").string(),
                                        dir / ("rank" + std::to_string(r) + ".log")));
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(wait_exit_code(ranks[r]), 0) << read_bytes(dir / ("rank" + std::to_string(r) + ".log"));
  EXPECT_NE(read_bytes(dir / "rank0.log").find("on 2 processes (torchrun)"), std::string::npos)
      << read_bytes(dir / "rank0.log");
  EXPECT_TRUE(read_bytes(dir / "threads.onnx") == read_bytes(dir / "procs.onnx"));

  const std::string long_run = "train " + kModels +
                               "cnn_opset17.onnx --data synthetic:1,28,28:10:96000 --batch 12 "
                               "--validation 0 --test-data none --strategy dp --comm-timeout 30 -o " +
                               (dir / "long.onnx").string();
  const pid_t rank0 = start_torchrun_rank(0, 2, port + 1, long_run, dir / "long0.log");
  const pid_t rank1 = start_torchrun_rank(1, 2, port + 1, long_run, dir / "long1.log");
  // Up to 90 s for the first step: under the sanitizers with another test beside it, making the 96,000
  // synthetic rows and the initial broadcast took more than the 12 s this once allowed, and rank 1 was
  // killed before any step (the run then names no step).
  for (int i = 0; i < 4500 && read_bytes(dir / "long0.log").find("step 1/") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_NE(read_bytes(dir / "long0.log").find("step 1/"), std::string::npos) << "no step within 90 s";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(rank1, SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  const int code = wait_exit_code(rank0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  wait_exit_code(rank1);
  const std::string log = read_bytes(dir / "long0.log");
  EXPECT_EQ(code, 1) << log;
  EXPECT_LT(seconds, 10) << log;  // well inside the 30 s timeout: the closed connection is noticed at once
  EXPECT_NE(log.find("rank 1 closed its connection"), std::string::npos) << log;
  EXPECT_NE(log.find("step "), std::string::npos) << log;
}

// The README's quick start (tools/quickstart.sh): the Fashion-MNIST CNN reaches 90% test accuracy in
// three epochs (measured 90.25% with seed 0; seeds 1-3: 90.35%, 90.77%, 90.48%).
TEST(TrainCli, QuickStartReachesNinetyPercentTestAccuracy) {
  const fs::path dir = scratch("quickstart");
  const CliRun r =
      run("train " + kModels + "cnn_opset17.onnx " + kQuickStartOptions + " -o " + (dir / "m.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t line = r.output.find("final: test loss");
  ASSERT_NE(line, std::string::npos) << r.output;
  const size_t at = r.output.find("accuracy ", line);
  const double accuracy = std::stod(r.output.substr(at + 9));
  EXPECT_GE(accuracy, 90.0) << r.output;
}

}  // namespace
}  // namespace onnxtrain
