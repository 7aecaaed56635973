// `train --tensorboard DIR` (frontend/tensorboard_events.h): the CRC-32C of TFRecord files against its
// published check value, an event file read back record by record with every checksum checked, a damaged
// file refused with the record's offset, and a training run whose event file holds the figures of its
// --metrics file, step for step. tests/tensorboard_reader_test.py reads the same kind of file with
// TensorBoard's own reader.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "frontend/tensorboard_events.h"
#include "graph/error.h"
#include "tests/cli_processes.h"
#include "tests/cli_run.h"

namespace onnxtrain {
namespace {

namespace fs = std::filesystem;
using testing_support::read_bytes;

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";

std::span<const uint8_t> bytes(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

fs::path only_event_file(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().find("tfevents") != std::string::npos) files.push_back(entry.path());
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? fs::path() : files[0];
}

TEST(TensorBoard, Crc32cMatchesTheCastagnoliCheckValue) {
  EXPECT_EQ(crc32c(bytes("123456789")), 0xE3069283u);  // RFC 3720, B.4; the CRC catalogue's check value
  EXPECT_EQ(crc32c(bytes("")), 0u);
  EXPECT_EQ(crc32c(bytes(std::string(32, '\0'))), 0x8A9136AAu);  // RFC 3720, B.4: 32 bytes of zeros
}

TEST(TensorBoard, EventsReadBackAndDamageIsFound) {
  const fs::path dir = testing_support::scratch_dir("onnxtrain_tensorboard", "events");
  std::string path;
  {
    TensorBoardEvents events((dir / "run").string());  // made when missing
    events.scalar("train/loss", 2.5, 1, 100.0);
    events.scalar("val/accuracy", 0.75, 10, 101.5);
    path = events.path();
  }
  const std::vector<TensorBoardScalar> scalars = read_tensorboard_scalars(path);
  ASSERT_EQ(scalars.size(), 2u);
  EXPECT_EQ(scalars[0].tag, "train/loss");
  EXPECT_EQ(scalars[0].step, 1);
  EXPECT_EQ(scalars[0].value, 2.5);
  EXPECT_EQ(scalars[1].tag, "val/accuracy");
  EXPECT_EQ(scalars[1].step, 10);
  EXPECT_FLOAT_EQ(scalars[1].value, 0.75);
  EXPECT_EQ(scalars[1].wall_time, 101.5);

  std::string data = read_bytes(path);
  data[data.size() - 6] ^= 0x01;  // a bit of the last record's body
  std::ofstream(path, std::ios::binary) << data;
  try {
    read_tensorboard_scalars(path);
    FAIL() << "a damaged record was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
  std::ofstream(path, std::ios::binary) << data.substr(0, data.size() - 3);
  EXPECT_THROW(read_tensorboard_scalars(path), Error);
  // A file where the folder should be: an error naming it, before any training.
  std::ofstream(dir / "file") << "x";
  EXPECT_THROW(TensorBoardEvents((dir / "file").string()), Error);
  fs::remove_all(dir);
}

// The event file of a run holds what its --metrics file holds: every step's loss and lr at that step,
// each epoch's validation loss and accuracy, and the final test accuracy, at the last step.
TEST(TensorBoard, TrainingRunWritesTheMetricsAsScalars) {
  const fs::path dir = testing_support::scratch_dir("onnxtrain_tensorboard", "train");
  const testing_support::CliRun r = testing_support::run_cli(
      "train " + kModels + "mlp_opset17.onnx --data synthetic:1,28,28:10:640 --batch 64 --epochs 2 " +
      "--test-data synthetic:1,28,28:10:128 --metrics " + (dir / "m.jsonl").string() + " --tensorboard " +
      (dir / "tb").string() + " -o " + (dir / "m.onnx").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<std::pair<std::string, int64_t>, double> scalars;
  for (const TensorBoardScalar& s : read_tensorboard_scalars(only_event_file(dir / "tb").string()))
    scalars[{s.tag, s.step}] = s.value;
  std::istringstream lines(read_bytes(dir / "m.jsonl"));
  int64_t step = 0, compared = 0;
  for (std::string text; std::getline(lines, text);) {
    const nlohmann::json line = nlohmann::json::parse(text);
    std::vector<std::pair<std::string, std::string>> fields;  // (metrics key, TensorBoard tag)
    if (line.contains("step")) {
      step = line["step"].get<int64_t>();
      fields = {{"loss", "train/loss"}, {"lr", "train/lr"}, {"samples_per_s", "train/samples_per_s"}};
    } else {
      fields = {{"val_loss", "val/loss"}, {"val_accuracy", "val/accuracy"}, {"test_accuracy", "test/accuracy"}};
    }
    for (const auto& [key, tag] : fields) {
      if (!line.contains(key)) continue;
      ASSERT_TRUE(scalars.count({tag, step})) << tag << " at step " << step;
      const double value = scalars[{tag, step}];
      EXPECT_FLOAT_EQ(value, line[key].get<float>()) << tag << " at step " << step;
      ++compared;
    }
  }
  // 9 steps per epoch (576 rows after the validation split) x 2 epochs x 3 fields, 2 epochs x 2, 1 test.
  EXPECT_EQ(compared, 18 * 3 + 4 + 1);
  EXPECT_EQ(scalars.size(), static_cast<size_t>(compared + 1));  // + test/loss
  fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxtrain
