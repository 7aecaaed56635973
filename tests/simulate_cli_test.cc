// `onnxtrain simulate` as a user runs it: a preset machine and strategies give a table, a JSON document
// and Chrome traces whose figures agree with each other; a machine described in JSON with little memory
// leaves out what does not fit; --recommend's winner comes with a command that trains; bad machines are
// clear errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli_run.h"

using onnxtrain::testing_support::run_cli;
namespace fs = std::filesystem;

namespace {

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";

class SimulateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnxtrain_simulate_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  nlohmann::json read_json(const fs::path& path) {
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  }
  fs::path dir_;
};

TEST_F(SimulateCli, PresetMachineTableJsonAndTraces) {
  const fs::path json = dir_ / "sim.json", traces = dir_ / "traces";
  const auto r = run_cli("simulate " + kModels +
                         "resnet_opset17.onnx --machine 8xh100 --strategies dp:8,pipedream:4,gpipe:4x8,ps:4:2 "
                         "--batch 64 --json " +
                         json.string() + " --trace " + traces.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(simulated)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("limited by"), std::string::npos) << r.output;
  const nlohmann::json doc = read_json(json);
  EXPECT_EQ(doc["machine"]["devices_per_node"], 8);
  ASSERT_EQ(doc["runs"].size(), 5u) << "single (the baseline) and the four asked for";
  for (const auto& run : doc["runs"]) {
    const auto& s = run["simulated"];
    SCOPED_TRACE(run["strategy"].get<std::string>());
    EXPECT_GT(s["samples_per_s"].get<double>(), 0);
    EXPECT_NEAR(s["samples_per_s"].get<double>() * s["step_seconds"].get<double>(), 64, 1e-6);
    EXPECT_TRUE(s["fits_memory"].get<bool>());
    EXPECT_GT(s["peak_memory_bytes"].get<int64_t>(), 0);
    const std::string name = "trace-resnet_opset17-" + [&] {
      std::string spec = run["strategy"];
      for (char& c : spec) c = c == ':' ? '-' : c;
      return spec;
    }() + ".json";
    const nlohmann::json trace = read_json(traces / name);
    int spans = 0;
    for (const auto& e : trace["traceEvents"]) spans += e["ph"] == "X";
    EXPECT_GT(spans, 0) << name;
  }
  EXPECT_EQ(doc["runs"][2]["simulated"]["workers"].size(), 4u) << "pipedream:4 has four stages";
  EXPECT_EQ(doc["runs"][2]["simulated"]["split"].size(), 4u);
}

TEST_F(SimulateCli, RecommendationOnAJsonMachineLeavesOutWhatDoesNotFitAndItsCommandTrains) {
  const fs::path machine = dir_ / "small.json", plan = dir_ / "plan.json", json = dir_ / "rec.json";
  // Two CPU-like devices of 1 MB each: one device training the MLP alone needs 1.4 MB (weights, gradients,
  // velocity, activations), central storage and parameter-server workers (state on the host) about 0.9 MB.
  std::ofstream(machine) << R"({"name": "two small CPUs", "nodes": 1, "devices_per_node": 2,
    "device": {"name": "small CPU", "fp32_flops": 1e11, "memory_bytes": 1000000, "memory_bandwidth": 1e10,
               "link": {"name": "shared memory", "bandwidth": 5e9, "latency_s": 1e-6}}})";
  const auto r = run_cli("simulate " + kModels + "mlp_opset17.onnx --machine " + machine.string() +
                         " --recommend --batch 16 --plan-out " + plan.string() + " --json " + json.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json doc = read_json(json);
  const auto& rec = doc["recommendation"].begin().value();
  bool single_left_out = false;
  for (const auto& why : rec["left_out"]) single_left_out |= why.get<std::string>().starts_with("single:");
  EXPECT_TRUE(single_left_out) << rec.dump(2);
  ASSERT_FALSE(rec["top"].empty());
  for (const auto& t : rec["top"]) EXPECT_TRUE(t["fits_memory"].get<bool>()) << t.dump();
  std::string command = rec["command"];
  ASSERT_TRUE(command.starts_with("onnxtrain train ")) << command;
  EXPECT_EQ(command.find("--device cuda"), std::string::npos) << "a CPU machine: " << command;
  if (!rec["plan"].get<std::string>().empty()) EXPECT_TRUE(fs::exists(plan));
  // The winner's command trains as printed, given data (simulate has none: here a few synthetic rows), and
  // writes MODEL.trained.onnx in the folder it runs in.
  command = command.substr(std::string("onnxtrain ").size()) + " --data synthetic:1,28,28:10:64 --test-data none";
  const auto trained = onnxtrain::testing_support::run_cli_prefixed("cd " + dir_.string() + " &&", command);
  EXPECT_EQ(trained.exit_code, 0) << command << "\n" << trained.output;
  EXPECT_TRUE(fs::exists(dir_ / "mlp_opset17.trained.onnx")) << trained.output;
}

TEST_F(SimulateCli, BadMachinesAreClearErrors) {
  auto r = run_cli("simulate " + kModels + "mlp_opset17.onnx --machine dgx-9000 --strategies dp:2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("known: 8xa100-pcie4"), std::string::npos) << r.output;
  const fs::path machine = dir_ / "typo.json";
  std::ofstream(machine) << R"({"device": "h100", "nodes": 2, "devices_per_node": 8})";
  r = run_cli("simulate " + kModels + "mlp_opset17.onnx --machine " + machine.string() + " --strategies dp:2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("inter_node_link"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("typo.json"), std::string::npos) << r.output;
  r = run_cli("simulate " + kModels + "mlp_opset17.onnx --machine 8xh100 --strategies dp:16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("needs 16 devices"), std::string::npos) << r.output;
}

}  // namespace
