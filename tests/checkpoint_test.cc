// Training checkpoints (executor/checkpoint.h): exact round trips of every field and tensor byte, the
// atomic write and its rotation, and the refusals a damaged or foreign file must get.
#include "executor/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "executor/optimizer.h"
#include "tests/child_process.h"

using namespace onnxtrain;
namespace fs = std::filesystem;

namespace {

// A fresh directory per test, removed afterwards.
class CheckpointTest : public testing::Test {
 protected:
  void SetUp() override {
    const testing::TestInfo* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(testing::TempDir()) /
           ("onnxtrain_checkpoint_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }
  fs::path dir_;
};

// Deterministic non-trivial bytes, so that a misplaced or swapped tensor cannot compare equal.
Tensor filled(DType dtype, std::vector<int64_t> sizes, unsigned seed) {
  Tensor t(dtype, std::move(sizes));
  for (size_t i = 0; i < t.nbytes(); ++i) t.raw()[i] = static_cast<std::byte>((i * 131 + seed * 17 + 7) & 0xff);
  return t;
}

Tensor floats(std::vector<int64_t> sizes, float start) {
  Tensor t(DType::Float32, std::move(sizes));
  float v = start;
  for (float& x : t.data<float>()) x = (v += 0.37f);
  return t;
}

void expect_same_tensors(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    const Tensor& u = b.at(name);
    EXPECT_EQ(t.dtype(), u.dtype()) << name;
    EXPECT_EQ(t.sizes(), u.sizes()) << name;
    ASSERT_EQ(t.nbytes(), u.nbytes()) << name;
    if (t.nbytes() > 0) {
      EXPECT_EQ(std::memcmp(t.raw(), u.raw(), t.nbytes()), 0) << name;
    }
  }
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The message read_checkpoint throws (empty when it does not throw).
std::string read_error(const std::string& path) {
  try {
    read_checkpoint(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), path) << e.what();
    return e.what();
  }
  return "";
}

TrainingCheckpoint small_checkpoint(int64_t step) {
  TrainingCheckpoint c;
  c.step = step;
  c.next_epoch = step / 10;
  c.next_batch = step % 10;
  c.seed = 7;
  c.config = {{"optimizer", "momentum"}, {"lr", 0.01}};
  c.tensors = {{"a", floats({2, 3}, 1.0f)}, {"b", floats({4}, 2.0f)}};
  return c;
}

// A file in the checkpoint layout with a chosen header and data, for headers no writer produces.
std::string forge(const std::string& header, const std::string& data, uint32_t version = 1) {
  std::string s("ONNXTRAINCKPT\0", 14);
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((version >> (8 * i)) & 0xff));
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((uint64_t{header.size()} >> (8 * i)) & 0xff));
  s += header;
  // zlib's CRC-32 (reflected polynomial 0xEDB88320), computed here independently of checkpoint.cc.
  uint32_t crc = 0xffffffffu;
  for (unsigned char ch : header) {
    crc ^= ch;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  crc ^= 0xffffffffu;
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  return s + data;
}

}  // namespace

TEST_F(CheckpointTest, RoundTripKeepsEveryFieldAndByte) {
  TrainingCheckpoint c;
  c.step = 1200;
  c.next_epoch = 3;
  c.next_batch = 356;
  c.seed = 0xfedcba9876543210ull;  // above INT64_MAX: must survive as unsigned
  c.config = {{"optimizer", "adam"},
              {"lr", 0.1},
              {"batch", 64},
              {"loss", "cross-entropy"},
              {"model", "models/cnn_opset17.onnx"},
              {"betas", {0.9, 0.999}},
              {"nested", {{"warmup", nullptr}}}};
  c.tensors = {
      {"conv1.weight", floats({8, 1, 3, 3}, -1.0f)}, {"conv1.bias", floats({8}, 0.5f)},
      {"bn.num_batches", Tensor::scalar_int64(-42)}, {"scalar", floats({}, 3.0f)},
      {"empty", Tensor(DType::Float32, {0, 4})},     {"ids", Tensor::vector_int64({1, -2, 3, INT64_MIN, INT64_MAX})}};
  // The other fixed-size dtypes, stored as raw bytes.
  const DType others[] = {DType::Float64, DType::Float16,   DType::BFloat16,  DType::Int8,   DType::UInt8,
                          DType::Int16,   DType::UInt16,    DType::Int32,     DType::UInt32, DType::UInt64,
                          DType::Bool,    DType::Complex64, DType::Complex128};
  unsigned seed = 1;
  for (DType d : others) c.tensors["x_" + std::string(dtype_name(d))] = filled(d, {3, 5}, seed++);

  // Real optimizer state: momentum buffers and int64 step scalars after two steps.
  Optimizer opt({.kind = OptimizerKind::sgd, .momentum = 0.9});
  Tensor w = floats({8}, 0.0f), g = floats({8}, 1.0f);
  opt.step({{"conv1.bias", w.data<float>(), g.data<float>()}});
  opt.step({{"conv1.bias", w.data<float>(), g.data<float>()}});
  c.optimizer_state = opt.state_tensors();
  ASSERT_TRUE(c.optimizer_state.count("global_step"));
  // A name in both sections stays apart.
  c.optimizer_state["conv1.weight"] = Tensor::scalar_int64(5);
  // SpecTrain's kept averages, in their own section (and a name the optimizer section has too).
  c.predictor_state = {{"conv1.bias/average", floats({8}, 0.25f)},
                       {"conv1.bias/observed", Tensor::scalar_int64(7)},
                       {"conv1.weight", Tensor::scalar_int64(6)}};

  const std::string path = write_checkpoint(dir(), c);
  EXPECT_EQ(fs::path(path).filename(), "checkpoint-00001200.otck");
  const TrainingCheckpoint r = read_checkpoint(path);
  EXPECT_EQ(r.step, 1200);
  EXPECT_EQ(r.next_epoch, 3);
  EXPECT_EQ(r.next_batch, 356);
  EXPECT_EQ(r.seed, 0xfedcba9876543210ull);
  EXPECT_EQ(r.config, c.config);
  EXPECT_EQ(r.config.at("lr").get<double>(), 0.1);  // bit-exact double
  expect_same_tensors(c.tensors, r.tensors);
  expect_same_tensors(c.optimizer_state, r.optimizer_state);
  expect_same_tensors(c.predictor_state, r.predictor_state);
  EXPECT_EQ(r.tensors.at("bn.num_batches").data<int64_t>()[0], -42);
  EXPECT_EQ(r.tensors.at("scalar").rank(), 0);
  EXPECT_EQ(r.tensors.at("empty").numel(), 0);

  // The optimizer resumes from what was read.
  std::map<std::string, Tensor> state = r.optimizer_state;
  state.erase("conv1.weight");
  Optimizer resumed({.kind = OptimizerKind::sgd, .momentum = 0.9});
  resumed.load_state(state);
  EXPECT_EQ(resumed.global_step(), 2);
  expect_same_tensors(resumed.state_tensors(), opt.state_tensors());
}

TEST_F(CheckpointTest, FileNamesCarryTheZeroPaddedStep) {
  EXPECT_EQ(checkpoint_file_name(0), "checkpoint-00000000.otck");
  EXPECT_EQ(checkpoint_file_name(1200), "checkpoint-00001200.otck");
  EXPECT_EQ(checkpoint_file_name(123456789), "checkpoint-123456789.otck");
  // The writer creates a missing directory.
  const std::string nested = (dir_ / "a" / "b").string();
  const std::string path = write_checkpoint(nested, small_checkpoint(5));
  EXPECT_EQ(path, (dir_ / "a" / "b" / "checkpoint-00000005.otck").string());
  EXPECT_EQ(read_checkpoint(path).step, 5);
}

TEST_F(CheckpointTest, KeepLastKeepsExactlyTheNewest) {
  for (int64_t step = 10; step <= 60; step += 10) write_checkpoint(dir(), small_checkpoint(step), 3);
  std::vector<int64_t> steps;
  for (const CheckpointFile& f : list_checkpoints(dir())) steps.push_back(f.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{40, 50, 60}));
  for (const CheckpointFile& f : list_checkpoints(dir())) EXPECT_EQ(read_checkpoint(f.path).step, f.step);

  // keep_last 1 leaves only the one just written.
  write_checkpoint(dir(), small_checkpoint(70), 1);
  ASSERT_EQ(list_checkpoints(dir()).size(), 1u);
  EXPECT_EQ(list_checkpoints(dir())[0].step, 70);

  // A checkpoint with a lower step than those present is never the one deleted.
  write_checkpoint(dir(), small_checkpoint(80), 0);
  write_checkpoint(dir(), small_checkpoint(90), 0);  // keep_last 0: no rotation
  EXPECT_EQ(list_checkpoints(dir()).size(), 3u);
  write_checkpoint(dir(), small_checkpoint(5), 2);
  steps.clear();
  for (const CheckpointFile& f : list_checkpoints(dir())) steps.push_back(f.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{5, 80, 90}));

  // Rewriting a step replaces its file.
  TrainingCheckpoint again = small_checkpoint(90);
  again.seed = 99;
  write_checkpoint(dir(), again, 0);
  EXPECT_EQ(read_checkpoint(*latest_checkpoint(dir())).seed, 99u);
}

TEST_F(CheckpointTest, WriteLeavesNoTempFiles) {
  write_checkpoint(dir(), small_checkpoint(1));
  write_checkpoint(dir(), small_checkpoint(2));
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"checkpoint-00000001.otck", "checkpoint-00000002.otck"}));
}

TEST_F(CheckpointTest, LeftoverTempFileIsIgnoredThenRemoved) {
  const std::string good = write_checkpoint(dir(), small_checkpoint(100));
  // A writer killed mid-write at a later step left its temp file (half a checkpoint).
  const std::string full = read_bytes(good);
  const fs::path temp = dir_ / "checkpoint-00000200.otck.tmp-12345";
  write_bytes(temp.string(), full.substr(0, full.size() / 2));
  write_bytes((dir_ / "notes.txt").string(), "not a checkpoint");

  EXPECT_EQ(latest_checkpoint(dir()), good);
  ASSERT_EQ(list_checkpoints(dir()).size(), 1u);
  EXPECT_EQ(read_checkpoint(*latest_checkpoint(dir())).step, 100);

  write_checkpoint(dir(), small_checkpoint(101));
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_TRUE(fs::exists(dir_ / "notes.txt"));  // other files are not the writer's business
}

// A full disk (RLIMIT_FSIZE here, EFBIG) while writing a checkpoint: "PATH: write failed: <strerror>",
// no partial file under the checkpoint's name, no temporary left, the older checkpoints untouched.
TEST_F(CheckpointTest, AFailedWriteIsAnErrorAndLeavesNoPartialCheckpoint) {
  const std::string good = write_checkpoint(dir(), small_checkpoint(100));
  const std::string before = read_bytes(good);
  const testing_support::ChildResult r = testing_support::run_in_child([&] {
    testing_support::limit_file_size(before.size() / 2);
    try {
      write_checkpoint(dir(), small_checkpoint(200));
      return std::string("no error");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  });
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.message, (dir_ / "checkpoint-00000200.otck").string() + ": write failed: File too large");
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"checkpoint-00000100.otck"});
  EXPECT_EQ(read_bytes(good), before);
  EXPECT_EQ(latest_checkpoint(dir()), good);
}

TEST_F(CheckpointTest, FlippedTensorByteIsRefusedNamingTheTensor) {
  const std::string path = write_checkpoint(dir(), small_checkpoint(3));
  std::string bytes = read_bytes(path);
  // Table order is parameters by name: "a" (6 floats) then "b" (4 floats) at the end of the file.
  bytes[bytes.size() - 1] ^= 0x01;
  write_bytes(path, bytes);
  std::string message = read_error(path);
  EXPECT_NE(message.find("checksum mismatch"), std::string::npos) << message;
  EXPECT_NE(message.find("parameter tensor 'b'"), std::string::npos) << message;
  EXPECT_NE(message.find(path), std::string::npos) << message;

  bytes[bytes.size() - 1] ^= 0x01;  // restore b, damage a
  bytes[bytes.size() - 4 * 4 - 1] ^= 0x40;
  write_bytes(path, bytes);
  message = read_error(path);
  EXPECT_NE(message.find("parameter tensor 'a'"), std::string::npos) << message;

  bytes[bytes.size() - 4 * 4 - 1] ^= 0x40;  // restored: reads again
  write_bytes(path, bytes);
  EXPECT_EQ(read_error(path), "");
}

TEST_F(CheckpointTest, FlippedHeaderByteIsRefused) {
  const std::string path = write_checkpoint(dir(), small_checkpoint(3));
  std::string bytes = read_bytes(path);
  const size_t at = bytes.find("momentum");
  ASSERT_NE(at, std::string::npos);
  bytes[at] = 'M';
  write_bytes(path, bytes);
  const std::string message = read_error(path);
  EXPECT_NE(message.find("header checksum mismatch"), std::string::npos) << message;
}

TEST_F(CheckpointTest, TruncatedFileIsRefused) {
  const std::string path = write_checkpoint(dir(), small_checkpoint(3));
  const std::string bytes = read_bytes(path);
  const size_t header_end = bytes.find("]}]}");  // the end of the JSON header
  ASSERT_NE(header_end, std::string::npos);
  // Mid data, one byte short, right after the header's CRC, mid header, mid prefix.
  for (size_t cut : {bytes.size() - 10, bytes.size() - 1, header_end + 4 + 4, header_end - 20, size_t{20}}) {
    write_bytes(path, bytes.substr(0, cut));
    const std::string message = read_error(path);
    EXPECT_NE(message.find("truncated"), std::string::npos) << "cut at " << cut << ": " << message;
  }
  // Bytes appended after the data are refused too.
  write_bytes(path, bytes + "x");
  EXPECT_NE(read_error(path).find("unexpected bytes after the tensor data"), std::string::npos);
}

TEST_F(CheckpointTest, WrongMagicAndVersionAreRefused) {
  const std::string path = (dir_ / "checkpoint-00000001.otck").string();
  write_bytes(path, "this is a text file, not a checkpoint at all");
  EXPECT_NE(read_error(path).find("not an onnxtrain checkpoint"), std::string::npos) << read_error(path);
  write_bytes(path, "");
  EXPECT_NE(read_error(path).find("not an onnxtrain checkpoint"), std::string::npos);
  // An ONNX model is not a checkpoint either.
  write_bytes(path, std::string("\x08\x07\x12\x07pytorch", 11));
  EXPECT_NE(read_error(path).find("not an onnxtrain checkpoint"), std::string::npos);

  write_bytes(path, forge(R"({"format":"onnxtrain training checkpoint"})", "", 2));
  const std::string message = read_error(path);
  EXPECT_NE(message.find("unsupported checkpoint format version 2"), std::string::npos) << message;

  EXPECT_NE(read_error((dir_ / "missing.otck").string()).find("cannot open checkpoint"), std::string::npos);
}

TEST_F(CheckpointTest, BadHeaderIsRefused) {
  const std::string path = (dir_ / "forged.otck").string();
  const std::string good = R"({"format":"onnxtrain training checkpoint","step":1,"next_epoch":0,"next_batch":0,)"
                           R"("seed":1,"config":{},"data_bytes":4,"tensors":[{"name":"w","section":"param",)"
                           R"("dtype":"float32","sizes":[1],"offset":0,"bytes":4,"crc32":558161692}]})";
  write_bytes(path, forge(good, std::string("\0\0\0\0", 4)));
  // The forging itself is right: the file reads (crc32 of four zero bytes is 558161692, i.e. 0x2144DF1C).
  ASSERT_EQ(read_error(path), "");
  EXPECT_EQ(read_checkpoint(path).tensors.at("w").data<float>()[0], 0.0f);

  struct Case {
    std::string header, data, expected;
  };
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string h = good;
    h.replace(h.find(from), from.size(), to);
    return h;
  };
  const std::string z4("\0\0\0\0", 4);
  const std::vector<Case> cases = {
      {"{not json", "", "not JSON"},
      {edit("\"step\":1", "\"step\":-1"), z4, "'step' is missing or not a non-negative integer"},
      {edit("\"seed\":1,", ""), z4, "'seed' is missing"},
      {edit("float32", "float33"), z4, "dtype \"float33\" cannot be stored"},
      {edit("float32", "string"), z4, "dtype \"string\" cannot be stored"},
      {edit("\"sizes\":[1]", "\"sizes\":[2]"), z4, "do not hold its dtype and sizes"},
      {edit("\"offset\":0", "\"offset\":1"), z4, "are not where the table says"},
      {edit("\"section\":\"param\"", "\"section\":\"grad\""), z4, "section \"grad\" is unknown"},
      {edit("\"data_bytes\":4", "\"data_bytes\":8"), z4 + z4, "'data_bytes' is 8, the tensors hold 4"},
  };
  for (const Case& k : cases) {
    write_bytes(path, forge(k.header, k.data));
    const std::string message = read_error(path);
    EXPECT_NE(message.find("bad checkpoint header"), std::string::npos) << k.header << ": " << message;
    EXPECT_NE(message.find(k.expected), std::string::npos) << k.header << ": " << message;
  }
}

TEST_F(CheckpointTest, LatestCheckpointPicksTheHighestStep) {
  EXPECT_EQ(latest_checkpoint(dir()), std::nullopt);                        // empty
  EXPECT_EQ(latest_checkpoint((dir_ / "missing").string()), std::nullopt);  // missing
  EXPECT_TRUE(list_checkpoints((dir_ / "missing").string()).empty());
  write_checkpoint(dir(), small_checkpoint(9), 0);
  write_checkpoint(dir(), small_checkpoint(123456789), 0);  // 9 digits: sorts after 8-digit names by step
  write_checkpoint(dir(), small_checkpoint(10), 0);
  EXPECT_EQ(latest_checkpoint(dir()), (dir_ / "checkpoint-123456789.otck").string());
  fs::create_directories(dir_ / "checkpoint-999999999.otck");  // a directory with a checkpoint's name
  EXPECT_EQ(latest_checkpoint(dir()), (dir_ / "checkpoint-123456789.otck").string());
}

TEST_F(CheckpointTest, AnotherModelIsRefusedWithTheNames) {
  TrainingCheckpoint c;
  c.tensors = {{"conv1.weight", floats({8, 1, 3, 3}, 0)},
               {"conv1.bias", floats({8}, 0)},
               {"fc.weight", floats({10, 8}, 0)},
               {"old.bias", floats({3}, 0)}};
  const std::string path = write_checkpoint(dir(), c);
  const TrainingCheckpoint r = read_checkpoint(path);

  std::map<std::string, Tensor> model = {{"conv1.weight", Tensor(DType::Float32, {16, 1, 3, 3})},
                                         {"conv1.bias", Tensor(DType::Float64, {8})},
                                         {"fc.weight", Tensor(DType::Float32, {10, 8})},
                                         {"fc.bias", Tensor(DType::Float32, {10})}};
  try {
    check_checkpoint_matches(r, model, path);
    FAIL() << "a checkpoint of another model was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.file(), path);
    EXPECT_NE(m.find("1 missing, 1 extra, 2 with another dtype or shape"), std::string::npos) << m;
    EXPECT_NE(m.find("conv1.weight is float32 (8,1,3,3) there, float32 (16,1,3,3) in the model"), std::string::npos)
        << m;
    EXPECT_NE(m.find("conv1.bias is float32 (8) there, float64 (8) in the model"), std::string::npos) << m;
    EXPECT_NE(m.find("in the model but not the checkpoint: fc.bias"), std::string::npos) << m;
    EXPECT_NE(m.find("in the checkpoint but not the model: old.bias"), std::string::npos) << m;
    EXPECT_EQ(m.find("fc.weight"), std::string::npos) << m;  // it matches
  }
  // Nothing is copied when they do not match.
  EXPECT_THROW(copy_checkpoint_tensors(r, model, path), Error);
  EXPECT_EQ(model.at("fc.weight").data<float>()[0], 0.0f);

  // The same model: accepted, and the bytes land in the model's own (shared) buffers.
  std::map<std::string, Tensor> same;
  for (const auto& [name, t] : c.tensors) same[name] = Tensor(t.dtype(), t.sizes());
  const Tensor shared = same.at("fc.weight");  // a copy sharing the buffer, as the graph holds it
  EXPECT_NO_THROW(check_checkpoint_matches(r, same, path));
  copy_checkpoint_tensors(r, same, path);
  expect_same_tensors(same, c.tensors);
  EXPECT_EQ(shared.data<float>()[5], c.tensors.at("fc.weight").data<float>()[5]);
  EXPECT_NE(shared.data<float>()[5], 0.0f);
}

TEST_F(CheckpointTest, OtherOptionsAreRefusedWithTheKeys) {
  TrainingCheckpoint c;
  c.config = {{"optimizer", "momentum"}, {"lr", 0.01}, {"batch", 64}, {"epochs", 2}};
  nlohmann::json here = {{"optimizer", "momentum"}, {"lr", 0.1}, {"batch", 64}, {"epochs", 5}, {"loss", "mse"}};
  try {
    check_checkpoint_config(c, here, "ck.otck", {"epochs"});
    FAIL() << "other options were accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("lr is 0.01 there, 0.1 here"), std::string::npos) << m;
    EXPECT_NE(m.find("loss is not set there, \"mse\" here"), std::string::npos) << m;
    EXPECT_EQ(m.find("epochs"), std::string::npos) << m;
    EXPECT_EQ(m.find("batch"), std::string::npos) << m;
  }
  here["lr"] = 0.01;
  here.erase("loss");
  EXPECT_NO_THROW(check_checkpoint_config(c, here, "ck.otck", {"epochs"}));
  EXPECT_THROW(check_checkpoint_config(c, here, "ck.otck"), Error);  // epochs differ
}

TEST_F(CheckpointTest, UnstorableTensorIsRefusedWithoutLeavingFiles) {
  TrainingCheckpoint c = small_checkpoint(4);
  c.optimizer_state["names"] = Tensor(DType::String, {2});
  try {
    write_checkpoint(dir(), c);
    FAIL() << "a string tensor was written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer tensor 'names'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(dir_));
  c.optimizer_state.clear();
  c.step = -1;
  EXPECT_THROW(write_checkpoint(dir(), c), Error);
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(CheckpointTest, UnwritableDirectoryIsAnError) {
  const fs::path file = dir_ / "plain_file";
  write_bytes(file.string(), "x");
  EXPECT_THROW(write_checkpoint((file / "sub").string(), small_checkpoint(1)), Error);
}

// Resnet-18-sized state is ~45 MB of float32 parameters; a checkpoint of 50 MB must write and read fast.
// A run over 3 ranks: each writes the tensors it owns, rank 0 the manifest; reading the manifest gives
// back the whole checkpoint, whatever layout reads it.
TrainingCheckpoint whole_with_optimizer(int64_t step) {
  TrainingCheckpoint c = small_checkpoint(step);
  c.tensors["c"] = floats({5}, 3.0f);
  c.tensors["d"] = floats({1, 2}, 4.0f);
  c.optimizer_state = {{"global_step", filled(DType::Int64, {}, 1)},
                       {"a/momentum", floats({2, 3}, 5.0f)},
                       {"a/step", filled(DType::Int64, {}, 2)},
                       {"d/momentum", floats({1, 2}, 6.0f)},
                       {"loss_scaler/scale", filled(DType::Float64, {}, 7)}};  // an entry of no tensor
  return c;
}

void write_sharded(const std::string& dir, const TrainingCheckpoint& whole, int ranks, int keep = 0) {
  for (int r = 0; r < ranks; ++r) {
    TrainingCheckpoint shard = whole;
    take_shard(whole, r, ranks, shard);
    write_checkpoint_shard(dir, shard, r);
  }
  TrainingCheckpoint manifest = whole;
  manifest.tensors.clear();
  manifest.optimizer_state.clear();
  manifest.shards = shard_files(whole.step, ranks);
  write_checkpoint(dir, manifest, keep);
}

TEST_F(CheckpointTest, ShardsWrittenByEveryRankReadBackAsTheWhole) {
  const TrainingCheckpoint whole = whole_with_optimizer(30);
  // Each rank holds a strict part: 4 tensors over 3 ranks (a, d on 0; b on 1; c on 2).
  TrainingCheckpoint part;
  take_shard(whole, 1, 3, part);
  EXPECT_EQ(part.tensors.size(), 1u);
  EXPECT_TRUE(part.tensors.contains("b"));
  take_shard(whole, 0, 3, part);
  EXPECT_EQ(part.tensors.size(), 2u);
  EXPECT_EQ(part.optimizer_state.size(), 5u);  // a's two, d's one, global_step, loss_scaler/scale

  write_sharded(dir(), whole, 3);
  ASSERT_EQ(latest_checkpoint(dir()), (dir_ / "checkpoint-00000030.otck").string());
  const TrainingCheckpoint back = read_checkpoint(*latest_checkpoint(dir()));
  EXPECT_EQ(back.step, 30);
  EXPECT_EQ(back.seed, whole.seed);
  EXPECT_EQ(back.config, whole.config);
  EXPECT_EQ(back.shards.size(), 3u);
  expect_same_tensors(back.tensors, whole.tensors);
  expect_same_tensors(back.optimizer_state, whole.optimizer_state);
}

// Tensor names may contain '/': an optimizer entry goes with the longest name it extends, once.
TEST_F(CheckpointTest, OptimizerEntriesGoWithTheLongestTensorNameTheyExtend) {
  TrainingCheckpoint whole = small_checkpoint(5);
  whole.tensors = {{"a", floats({2}, 1.0f)}, {"a/b", floats({3}, 2.0f)}};  // rank 0 and rank 1 of 2
  whole.optimizer_state = {{"a/momentum", floats({2}, 3.0f)},
                           {"a/b/momentum", floats({3}, 4.0f)},
                           {"global_step", filled(DType::Int64, {}, 1)}};
  TrainingCheckpoint zero, one;
  take_shard(whole, 0, 2, zero);
  take_shard(whole, 1, 2, one);
  EXPECT_EQ(zero.optimizer_state.size(), 2u);
  EXPECT_TRUE(zero.optimizer_state.contains("a/momentum"));
  EXPECT_TRUE(zero.optimizer_state.contains("global_step"));
  EXPECT_EQ(one.optimizer_state.size(), 1u);
  EXPECT_TRUE(one.optimizer_state.contains("a/b/momentum"));
  write_sharded(dir(), whole, 2);
  expect_same_tensors(read_checkpoint(*latest_checkpoint(dir())).optimizer_state, whole.optimizer_state);
}

TEST_F(CheckpointTest, AMissingOrDamagedShardIsRefusedAndShardsWithoutAManifestAreNeverRead) {
  write_sharded(dir(), whole_with_optimizer(10), 2);
  // Step 20: rank 1 died before rank 0 wrote the manifest; the newest complete checkpoint stays step 10.
  TrainingCheckpoint shard = whole_with_optimizer(20);
  take_shard(whole_with_optimizer(20), 0, 2, shard);
  write_checkpoint_shard(dir(), shard, 0);
  EXPECT_EQ(read_checkpoint(*latest_checkpoint(dir())).step, 10);
  // A manifest whose shard is not there is not written.
  TrainingCheckpoint manifest = small_checkpoint(20);
  manifest.tensors.clear();
  manifest.shards = shard_files(20, 2);
  EXPECT_THROW(write_checkpoint(dir(), manifest, 0), Error);
  // A flipped byte in a shard is reported with the shard's file.
  const std::string rank1 = (dir_ / shard_files(10, 2)[1]).string();
  std::string bytes = read_bytes(rank1);
  bytes[bytes.size() - 1] ^= 0x40;
  write_bytes(rank1, bytes);
  try {
    read_checkpoint((dir_ / "checkpoint-00000010.otck").string());
    ADD_FAILURE() << "a damaged shard was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), rank1);
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
  fs::remove(rank1);
  EXPECT_NE(read_error((dir_ / "checkpoint-00000010.otck").string()).find("rank-00001.otck is missing"),
            std::string::npos);
}

TEST_F(CheckpointTest, RotationRemovesWholeShardedSteps) {
  for (int64_t step = 10; step <= 40; step += 10) write_sharded(dir(), whole_with_optimizer(step), 2, 2);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"checkpoint-00000030.otck", "checkpoint-00000030.otck.shards",
                                             "checkpoint-00000040.otck", "checkpoint-00000040.otck.shards"}));
}

TEST_F(CheckpointTest, FiftyMegabytesRoundTrip) {
  TrainingCheckpoint c = small_checkpoint(1);
  for (int i = 0; i < 50; ++i) c.tensors["layer" + std::to_string(i) + ".weight"] = floats({256, 1024}, float(i));
  auto t0 = std::chrono::steady_clock::now();
  const std::string path = write_checkpoint(dir(), c);
  auto t1 = std::chrono::steady_clock::now();
  const TrainingCheckpoint r = read_checkpoint(path);
  auto t2 = std::chrono::steady_clock::now();
  expect_same_tensors(c.tensors, r.tensors);
  const double write_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double read_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  std::printf("50 MB checkpoint (%zu bytes): write %.1f ms (with fsync), read %.1f ms\n",
              static_cast<size_t>(fs::file_size(path)), write_ms, read_ms);
  EXPECT_GT(fs::file_size(path), 50u * 256 * 1024 * 4);
  EXPECT_LT(read_ms, 5000.0);  // generous: a per-element decoder would take far longer on 13M floats
}
