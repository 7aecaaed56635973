// `onnxtrain train --strategy ps` and `--central-storage` as a user runs them: the parameter server prints
// its staleness report and writes the model; central storage writes the model dp writes, byte for byte;
// misplaced flags are refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/cli_run.h"

namespace onnxtrain {
namespace {

namespace fs = std::filesystem;
using onnxtrain::testing_support::CliRun;
using onnxtrain::testing_support::run_cli;

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";
const std::string kQuick = "train " + kModels +
                           "cnn_opset17.onnx --data synthetic:1,28,28:10:256 --batch 16 --epochs 1 "
                           "--limit-batches 6 --seed 3 --test-data none";

fs::path scratch(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("onnxtrain_replicated_cli_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(ReplicatedCli, ParameterServerPrintsTheStalenessReport) {
  const fs::path dir = scratch("ps");
  const CliRun r =
      run_cli(kQuick + " --strategy ps --servers 2 --replicas 2 --ps-predict -o " + (dir / "ps.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("parameter server: 2 shards, 2 workers, 6 pushes, weight prediction on"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("staleness histogram:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("pushes per worker:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("predicted pulls:"), std::string::npos) << r.output;
  EXPECT_GT(fs::file_size(dir / "ps.onnx"), 0u);
  fs::remove_all(dir);
}

TEST(ReplicatedCli, CentralStorageWritesTheModelDataParallelWrites) {
  const fs::path dir = scratch("cs");
  const CliRun dp = run_cli(kQuick + " --strategy dp --replicas 3 -o " + (dir / "dp.onnx").string());
  ASSERT_EQ(dp.exit_code, 0) << dp.output;
  const CliRun cs = run_cli(kQuick + " --central-storage --strategy dp --replicas 3 -o " + (dir / "cs.onnx").string());
  ASSERT_EQ(cs.exit_code, 0) << cs.output;
  EXPECT_NE(cs.output.find("central storage: 3 replicas, 6 steps"), std::string::npos) << cs.output;
  EXPECT_EQ(read_bytes(dir / "cs.onnx"), read_bytes(dir / "dp.onnx"));
  fs::remove_all(dir);
}

TEST(ReplicatedCli, MisplacedFlagsAreRefused) {
  const fs::path dir = scratch("bad");
  const std::string out = " -o " + (dir / "m.onnx").string();
  const CliRun a = run_cli(kQuick + " --central-storage --strategy gpipe" + out);
  EXPECT_EQ(a.exit_code, 1) << a.output;
  EXPECT_NE(a.output.find("--central-storage goes with --strategy dp"), std::string::npos) << a.output;
  const CliRun b = run_cli(kQuick + " --ps-predict" + out);
  EXPECT_EQ(b.exit_code, 1) << b.output;
  EXPECT_NE(b.output.find("go with --strategy ps"), std::string::npos) << b.output;
  EXPECT_FALSE(fs::exists(dir / "m.onnx"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxtrain
