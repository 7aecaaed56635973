// The partitioner end to end: balance of the planned stages on the ResNet and transformer fixtures
// for an H100 preset, `onnxtrain partition` as a user runs it (table, plan.json the planner reads back,
// Graphviz, clear errors). Profiled times against measured ones: partition_timing_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "executor/trainer.h"
#include "frontend/importer.h"
#include "graph/autodiff/training_recipe.h"
#include "partitioner/cost_model.h"
#include "partitioner/plan_io.h"
#include "partitioner/planner.h"
#include "tests/cli_run.h"

namespace onnxtrain {
namespace {

namespace fs = std::filesystem;
const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";

using onnxtrain::testing_support::CliRun;
using onnxtrain::testing_support::run_cli_prefixed;
CliRun run(const std::string& args) { return onnxtrain::testing_support::run_cli(args); }

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("onnxtrain_partition_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

struct Fixture {
  ImportedModel model;
  std::unique_ptr<Trainer> trainer;  // builds the training graph `onnxtrain train` runs on a GPU
};

// The tests below price the graph for an H100: without the CPU's rewrites (BatchNorm + Relu and Add + Relu
// fused, MaxPool before Relu, FusedMatMul, Gelu, Gathers before Transposes), as a GPU trains.
Fixture training_fixture(const std::string& name) {
  Fixture f{import_model(kModels + name), nullptr};
  f.trainer = std::make_unique<Trainer>(f.model.graph, TrainerOptions{.loss = parse_loss_spec("cross-entropy"),
                                                                      .fuse_batch_norm_relu = false,
                                                                      .fuse_add_relu = false,
                                                                      .pool_before_relu = false,
                                                                      .fuse_matmul = false,
                                                                      .fuse_gelu = false,
                                                                      .gather_before_transpose = false});
  return f;
}

// Issue 5: on the ResNet and the transformer with 2, 4 and 8 stages for an H100, the slowest stage is
// within 15% of the mean stage (Σ stage times / N, transfers included) wherever the node granularity
// allows, that is unless the slowest stage is a single node that cannot be split further.
TEST(Partition, StagesOfTheFixturesAreBalancedOnAnH100) {
  const DeviceDescription h100 = device_from_preset("h100");
  for (const char* name : {"resnet_opset17.onnx", "transformer_opset17.onnx"}) {
    Fixture f = training_fixture(name);
    const CostProfile profile = build_cost_profile(f.trainer->training_graph(), 32, h100);
    for (int stages : {2, 4, 8}) {
      PlanOptions o{.stages = stages,
                    .micro_batches = 64,
                    .link = {h100.link.name, h100.link.bandwidth, h100.link.latency_s},
                    .optimizer_slots = 1};
      const Plan plan = plan_pipeline(profile, o);
      const auto slowest =
          std::max_element(plan.stages.begin(), plan.stages.end(),
                           [](const StagePlan& a, const StagePlan& b) { return a.time_seconds < b.time_seconds; });
      const double compute_ratio = plan.bottleneck_seconds / (plan.single_device_seconds / stages);
      std::printf("%-26s N=%d  slowest/mean stage %.3f  slowest/(compute/N) %.3f  slowest stage %lld node(s)\n", name,
                  stages, plan.balance, compute_ratio, static_cast<long long>(slowest->end_node - slowest->first_node));
      if (slowest->end_node - slowest->first_node > 1) {
        EXPECT_LE(plan.balance, 1.15) << name << " N=" << stages;
      }
    }
  }
}

// Issue 20: a transformer is cut between blocks or sublayers, where only the residual stream crosses
// with a gradient, never through an attention, unless that makes the bottleneck over 10% slower: the
// 2-layer GPT-2 export has few such places, so on 2 stages the later stage starts with a block's
// LayerNorm and its cut sends fewer bytes than the balance-only cut; 3 and 4 stages fall back.
TEST(Partition, TransformersAreCutBetweenBlocks) {
  const std::string file = kModels + "transformers/gpt2_torchscript.onnx";
  ImportedModel model = import_model(file, {.dims = {{"seq", 64}}});
  TrainerOptions t{.loss = parse_loss_spec("cross-entropy")};
  t.loss.classes_last = true;
  Trainer trainer(model.graph, t);
  const DeviceDescription h100 = device_from_preset("h100");
  const CostProfile profile = build_cost_profile(trainer.training_graph(), 16, h100);
  ASSERT_TRUE(profile.has_attention);
  const PlanLink link{h100.link.name, h100.link.bandwidth, h100.link.latency_s};
  const Plan blocks = plan_pipeline(profile, {.stages = 2, .micro_batches = 8, .link = link});
  const int64_t cut = blocks.stages[1].first_node;
  EXPECT_EQ(profile.cut_gradient_tensors[cut], 1) << "cut " << cut;
  EXPECT_EQ(profile.nodes[cut].op_type, "LayerNormalization") << "stage 1 starts at " << blocks.stages[1].first_name;
  PlanOptions free_cuts{.stages = 2, .micro_batches = 8, .link = link};
  free_cuts.cut_between_blocks = false;  // the planner as it was: balance alone
  const Plan balanced = plan_pipeline(profile, free_cuts);
  const int64_t free_cut = balanced.stages[1].first_node;
  std::printf(
      "gpt2 (seq 64, micro-batch 16), 2 stages: between blocks cut %lld (%s) sends %lld activation bytes, "
      "bottleneck %.3f ms; balance alone cut %lld (%s) sends %lld, bottleneck %.3f ms\n",
      static_cast<long long>(cut), blocks.stages[1].first_name.c_str(),
      static_cast<long long>(profile.cut_activation_bytes[cut]), 1e3 * blocks.bottleneck_seconds,
      static_cast<long long>(free_cut), balanced.stages[1].first_name.c_str(),
      static_cast<long long>(profile.cut_activation_bytes[free_cut]), 1e3 * balanced.bottleneck_seconds);
  EXPECT_LE(blocks.bottleneck_seconds, 1.10 * balanced.bottleneck_seconds);
}

// An outside check (2026-12-07): `train --strategy pipedream --stages 2` without --plan cut this 2-layer
// bidirectional LSTM (16 units, 12 steps; exported without constant folding) after the Slices and Concats that
// rearrange its weights, both LSTMs on stage 1, because the cost model priced an LSTM by its FLOPs alone, a quarter
// of its time at 16 units. With a step's fixed cost (DeviceDescription::step_overhead_s), the nominal CPU train plans
// on puts one LSTM on each stage.
TEST(Partition, TheNominalCpuPutsALayerOfATwoLayerLstmOnEachStage) {
  ImportedModel model =
      import_model(std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/recurrent/lstm_two_layer_ts.onnx");
  const TrainingRecipe recipe = make_training_recipe(model.graph, {.loss = parse_loss_spec("cross-entropy")});
  const DeviceDescription cpu = nominal_cpu();
  const CostProfile profile = build_cost_profile(recipe.training, 16, cpu);
  for (int micro_batches : {1, 2}) {  // pipedream; gpipe over 2 micro-batches
    const Plan plan = plan_pipeline(
        profile,
        {.stages = 2, .micro_batches = micro_batches, .link = {cpu.link.name, cpu.link.bandwidth, cpu.link.latency_s}});
    for (const StagePlan& stage : plan.stages) {
      const auto lstms = std::count_if(profile.nodes.begin() + stage.first_node, profile.nodes.begin() + stage.end_node,
                                       [](const NodeCost& n) { return n.op_type == "LSTM"; });
      EXPECT_EQ(lstms, 1) << "micro-batches " << micro_batches << ": the stage from " << stage.first_name;
    }
  }
}

// `partition` on this CPU measures with the threads a stage of the run gets (the executor shares the
// process's out), not all of them: with 2 threads, a 2-thread fork per tiny kernel made the probe's overhead
// 1 us against a stage's 0.23 us, and the same LSTM was cut after its weight nodes in 3 of 6 runs, and in 4 of
// 6 beside two busy processes (an outside check). With 1 thread per stage it is cut after its first LSTM.
TEST(Partition, TheCpuIsMeasuredWithTheThreadsOfAStage) {
  const std::string lstm = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/recurrent/lstm_two_layer_ts.onnx";
  CliRun r = run_cli_prefixed("env OMP_NUM_THREADS=2", "partition " + lstm + " --stages 2 --batch 16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 threads)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("/rnn/Shape                   /rnn/LSTM "), std::string::npos)
      << "stage 0 ends with the first LSTM:\n"
      << r.output;
  r = run_cli_prefixed("env OMP_NUM_THREADS=2", "partition " + lstm + " --stages 1 --batch 16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 threads)"), std::string::npos) << "one stage has every thread:\n" << r.output;
}

// A plan made for another run says so (an outside check, 2026-12-07): a bf16 plan given to an fp32 run names
// --precision (only the other way round did), and a plan's replicas that the run does not train are noted,
// where the run had dropped them without a word.
TEST(Partition, APlanMadeForAnotherRunSaysHowItDiffers) {
  const fs::path dir = scratch("other_run");
  const std::string mlp = kModels + "mlp_opset17.onnx", bf16 = (dir / "bf16.json").string(),
                    replicated = (dir / "replicated.json").string();
  const std::string train = "train " + mlp +
                            " --data synthetic:1,28,28:10:128 --batch 16 --epochs 1 --validation 0 --test-data none "
                            "--strategy pipedream --stages 2 -o " +
                            (dir / "out.onnx").string();
  ASSERT_EQ(run("partition " + mlp + " --stages 2 --batch 16 --precision bf16 -o " + bf16).exit_code, 0);
  CliRun r = run(train + " --plan " + bf16);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("partition --precision fp32"), std::string::npos) << r.output;
  ASSERT_EQ(run("partition " + mlp + " --stages 2 --batch 16 --replicas 2 -o " + replicated).exit_code, 0);
  r = run(train + " --plan " + replicated);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("gives stage 0 2 replica(s); this run trains 1 per stage"), std::string::npos) << r.output;
}

TEST(Partition, CommandWritesAPlanTheExecutorCanReadAndAGraph) {
  const fs::path dir = scratch("cli");
  const std::string plan = (dir / "plan.json").string(), dot = (dir / "plan.dot").string();
  const CliRun r = run("partition " + kModels + "resnet_opset17.onnx --stages 3 --device h100 --link nvlink4 -o " +
                       plan + " --dot " + dot);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* fragment : {"stage", "first node", "slowest stage", "samples/s", "bubble fraction", "NVLink"}) {
    EXPECT_NE(r.output.find(fragment), std::string::npos) << fragment << " missing in:\n" << r.output;
  }
  Fixture f = training_fixture("resnet_opset17.onnx");
  const CostProfile profile = build_cost_profile(f.trainer->training_graph(), 32, device_from_preset("h100"));
  std::vector<std::string> names;
  for (const NodeCost& n : profile.nodes) names.push_back(n.name);
  const Plan p = read_plan(plan, names);  // throws when the plan is for other nodes
  ASSERT_EQ(p.stages.size(), 3u);
  EXPECT_EQ(p.stages.front().first_node, 0);
  EXPECT_EQ(p.stages.back().end_node, static_cast<int64_t>(names.size()));
  std::ifstream in(dot);
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  EXPECT_NE(text.find("digraph"), std::string::npos);
  EXPECT_NE(text.find("cluster"), std::string::npos);

  // Another model's nodes: the plan is refused.
  Fixture cnn = training_fixture("cnn_opset17.onnx");
  std::vector<std::string> cnn_names;
  for (const NodeCost& n : build_cost_profile(cnn.trainer->training_graph(), 32, device_from_preset("h100")).nodes)
    cnn_names.push_back(n.name);
  EXPECT_THROW(read_plan(plan, cnn_names), Error);
}

TEST(Partition, CommandErrorsSayWhatWouldWork) {
  const std::string resnet = kModels + "resnet_opset17.onnx";
  CliRun r = run("partition " + resnet + " --stages 4 --device h100 --memory-cap 1K");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("smallest"), std::string::npos) << r.output;
  r = run("partition " + resnet + " --stages 100 --device h100");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  r = run("partition " + resnet + " --stages 3 --device h100 --split 5,2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  r = run("partition " + resnet + " --stages 2 --device h100 --memory-cap 80X");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("unknown unit"), std::string::npos) << r.output;
  r = run("partition " + resnet + " --stages 2 --device-profile /nonexistent/device.json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/device.json"), std::string::npos) << r.output;
  // A device profile's memory is the cap, as in simulate (an outside check's 1-byte profile was planned
  // without a word), and a number beyond double is named with the file (it was exit 3, no file).
  const fs::path profiles = scratch("profiles");
  std::ofstream(profiles / "tiny.json") << R"({"preset": "h100", "memory_bytes": 1000})";
  r = run("partition " + resnet + " --stages 2 --device-profile " + (profiles / "tiny.json").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("fits the memory cap of 1000 bytes"), std::string::npos) << r.output;
  std::ofstream(profiles / "huge.json") << R"({"preset": "h100", "fp32_flops": 1e400})";
  r = run("partition " + resnet + " --stages 2 --device-profile " + (profiles / "huge.json").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find((profiles / "huge.json").string() + ": device profile: not valid JSON"), std::string::npos)
      << r.output;
  // A user split is priced, not planned: the table shows exactly the cuts given.
  r = run("partition " + resnet + " --stages 3 --device h100 --split 5,12 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"end_node\": 5"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"end_node\": 12"), std::string::npos) << r.output;
}

// Issue 21: the planner counts every copy each strategy keeps. Per stage of the CNN over 4 stages, the
// run's peak memory (weights, working copy, stashes, activations in flight, optimizer state, gradients,
// gradient sum, prediction copies; the --metrics report) is within 10% of the plan's total (or 64 KiB,
// for the loss stage's few KiB).
TEST(Partition, PlannedMemoryPerStageIsWithinTenPercentOfTheRun) {
  const fs::path dir = scratch("memory");
  struct Case {
    std::string strategy;
    int micro_batches;
    std::string extra;
  };
  for (const Case& c : {Case{"naive", 1, ""}, Case{"pipedream", 1, ""}, Case{"spectrain", 1, ""},
                        Case{"spectrain", 1, " --prediction-metrics off"}, Case{"gpipe", 4, ""}, Case{"1f1b", 4, ""},
                        Case{"2bw", 2, ""}}) {
    SCOPED_TRACE(c.strategy + c.extra);
    const std::string plan = (dir / "plan.json").string(), metrics = (dir / "metrics.jsonl").string();
    const std::string common =
        " --stages 4 --strategy " + c.strategy + " --micro-batches " + std::to_string(c.micro_batches) + c.extra;
    CliRun r = run("partition " + kModels + "cnn_opset17.onnx --batch " + std::to_string(32 / c.micro_batches) +
                   common + " -o " + plan);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run("train " + kModels + "cnn_opset17.onnx --data synthetic:1,28,28:10:640 --batch 32 --validation 0" + common +
            " --plan " + plan + " --metrics " + metrics + " -o " + (dir / "out.onnx").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::ifstream in(metrics);
    nlohmann::json report;
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j.contains("report")) report = j["report"];
    }
    ASSERT_TRUE(report.is_object()) << "no report in " << metrics;
    std::ifstream plan_in(plan);
    const nlohmann::json planned = nlohmann::json::parse(plan_in);
    ASSERT_EQ(report["stages"].size(), 4u);
    for (size_t k = 0; k < 4; ++k) {
      const nlohmann::json& s = report["stages"][k];
      int64_t measured = 0;
      for (const char* kind : {"weight_bytes", "working_bytes", "stash_bytes", "activation_bytes", "optimizer_bytes",
                               "gradient_bytes", "gradient_sum_bytes", "prediction_bytes"})
        measured += s[kind].get<int64_t>();
      const int64_t predicted = planned["stages"][k]["memory"]["total"].get<int64_t>();
      EXPECT_LE(std::abs(predicted - measured), std::max<int64_t>(measured / 10, 64 << 10))
          << "stage " << k << ": planned " << predicted << " bytes, measured " << measured << "\n"
          << s.dump();
    }
  }
}

}  // namespace
}  // namespace onnxtrain
