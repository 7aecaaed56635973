// The minimised inputs of the fuzzers' findings (tools/run-fuzzers.sh, fuzz/), kept in
// tests/data/fuzz/<target>/: each goes through the entry point its fuzz target calls and must end in one
// onnxtrain::Error naming the file and what is wrong, never a crash, a huge allocation or another
// exception. Run under ASan+UBSan by tools/run-tests.sh (label malformed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <typeinfo>
#include <vector>

#include "executor/checkpoint.h"
#include "frontend/dataset.h"
#include "frontend/dataset_readers.h"
#include "frontend/importer.h"
#include "frontend/npy.h"
#include "partitioner/plan_io.h"

using namespace onnxtrain;
namespace fs = std::filesystem;

namespace {

const fs::path kFindings = fs::path(ONNXTRAIN_SOURCE_DIR) / "tests" / "data" / "fuzz";

std::string bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class FuzzRegression : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnxtrain_fuzz_regression_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  // What each fuzz target (fuzz/fuzz_<target>.cc) does with its input: the same files, names and calls.
  std::vector<std::function<void()>> entry_points(const std::string& target, const std::string& bytes) {
    if (target == "fuzz_model_bytes" || target == "fuzz_model_proto") {
      std::vector<float> weights(16384);  // fuzz/model_input.h's weights.bin
      for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<float>(i % 17) * 0.125f - 1.0f;
      write("weights.bin", std::string(reinterpret_cast<const char*>(weights.data()), weights.size() * sizeof(float)));
      const std::string path = write("model.onnx", bytes);
      return {[path] { import_model(path); }};
    }
    if (target == "fuzz_npy") {
      const std::string path = write("input.npy", bytes);
      return {[path] { read_npy(path); }, [bytes] { parse_npy_bytes(bytes, "member x.npy"); }};
    }
    if (target == "fuzz_npz") {
      const std::string path = write("data.npz", bytes);
      return {[path] { load_dataset("npz:" + path); }, [path] { load_dataset("npz:" + path, {.split = "test"}); }};
    }
    if (target == "fuzz_idx") {
      const std::string path = write("images-idx-ubyte", bytes);
      return {[path] { read_idx_images(path); }, [path] { read_idx_labels(path); }};
    }
    if (target == "fuzz_cifar") {
      write("test_batch.bin", bytes);
      const std::string dir = dir_.string();
      return {[dir] { load_dataset("cifar10:" + dir, {.split = "test"}); }};
    }
    if (target == "fuzz_tokens") {
      const DatasetOptions options{.seq_len = bytes.empty() ? 4 : static_cast<unsigned char>(bytes[0]) % 17,
                                   .integer_inputs = true};
      const std::string npy = write("stream.npy", bytes), bin = write("stream.bin", bytes);
      return {[=] { load_dataset("tokens:" + npy, options); }, [=] { load_dataset("tokens:" + bin, options); },
              [=] { load_dataset("text:" + bin, options); }};
    }
    if (target == "fuzz_checkpoint") {  // with the valid shard fuzz_checkpoint.cc writes next to the input
      TrainingCheckpoint shard{.step = 1, .next_batch = 3, .seed = 42, .config = {{"lr", 0.01}}};
      shard.tensors.emplace("fc.weight", Tensor(DType::Float32, {2, 3}));
      shard.optimizer_state.emplace("global_step", Tensor::scalar_int64(7));
      write_checkpoint_shard(dir_.string(), shard, 0);
      const std::string path = write("checkpoint-00000001.otck", bytes);
      return {[path] { read_checkpoint(path); }};
    }
    if (target == "fuzz_plan") {
      const std::string path = write("plan.json", bytes);
      return {[path] { read_plan(path); }};
    }
    ADD_FAILURE() << "tests/data/fuzz/" << target << ": no such fuzz target";
    return {};
  }

  // The message of the Error that one entry point of `target` throws on the finding `file`.
  std::string error_of(const std::string& target, const std::string& file, size_t entry = 0) {
    const auto calls = entry_points(target, bytes_of(kFindings / target / file));
    if (entry >= calls.size()) return "";
    try {
      calls[entry]();
    } catch (const Error& e) {
      return e.describe();
    }
    return "(accepted)";
  }

  fs::path dir_;
};

// Every saved finding, through every entry point of its target: an Error or a clean accept, nothing else
// (an escaping std::exception fails here; a crash or sanitizer report ends the test).
TEST_F(FuzzRegression, EverySavedFindingIsAnErrorOrAccepted) {
  ASSERT_TRUE(fs::is_directory(kFindings)) << kFindings;
  int files = 0;
  for (const auto& target : fs::directory_iterator(kFindings)) {
    for (const auto& finding : fs::directory_iterator(target.path())) {
      ++files;
      const std::string name = target.path().filename().string() + "/" + finding.path().filename().string();
      for (const auto& call : entry_points(target.path().filename().string(), bytes_of(finding.path()))) {
        try {
          call();
        } catch (const Error&) {
        } catch (const std::exception& e) {
          ADD_FAILURE() << name << ": " << typeid(e).name() << ": " << e.what();
        }
      }
    }
  }
  EXPECT_GT(files, 0);
}

// A manifest that lists itself as its shard recursed until the stack overflowed.
TEST_F(FuzzRegression, CheckpointManifestListingItselfIsRefused) {
  const std::string message = error_of("fuzz_checkpoint", "manifest_lists_itself.otck");
  EXPECT_NE(message.find((dir_ / "checkpoint-00000001.otck").string() +
                         ": bad checkpoint header: 'shards' in a shard of the manifest"),
            std::string::npos)
      << message;
}

// Three IDX sizes of up to 2^32 each overflowed the signed element count (UBSan), and so did a product
// beyond int64 followed by a size 0 (in Tensor's count).
TEST_F(FuzzRegression, IdxSizesOverflowingAreRefused) {
  std::string message = error_of("fuzz_idx", "sizes_overflow_2e64.idx");
  EXPECT_NE(
      message.find("images-idx-ubyte: truncated file: expected the IDX sizes (3,4294967291,4294967291), more than "
                   "2^63 bytes, got 32"),
      std::string::npos)
      << message;
  message = error_of("fuzz_idx", "sizes_beyond_int64_then_0.idx");
  EXPECT_NE(
      message.find("images-idx-ubyte: truncated file: expected the IDX sizes (4194303999,4278197248,0), more than "
                   "2^63 bytes, got 17"),
      std::string::npos)
      << message;
}

// An initializer's dims were allocated before its stored values were counted (2^46 floats for one value).
TEST_F(FuzzRegression, InitializerDimsBeyondItsValuesAreRefused) {
  const std::string message = error_of("fuzz_model_proto", "initializer_dims_2e46_one_value.onnx");
  EXPECT_NE(message.find("model.onnx: initializer 'w' has 1 stored elements but its dims say 70368744177664"),
            std::string::npos)
      << message;
}

// ONNX 1.12's shape inference copied a 9-byte raw_data into a buffer sized for one int64 (heap overflow).
TEST_F(FuzzRegression, RawDataOfTheWrongSizeIsRefusedBeforeOnnxSeesIt) {
  const std::string message = error_of("fuzz_model_proto", "reshape_shape_raw_data_9_bytes.onnx");
  EXPECT_NE(message.find("model.onnx: initializer 'shape' holds 9 bytes of raw_data, its int64 dims (1) need 8"),
            std::string::npos)
      << message;
}

// A Gather whose axis is out of range for its 1-D input, then nodes with data propagation: ONNX 1.12 went on
// after the Gather's failed inference and its propagators dereferenced the type never set (SEGV).
TEST_F(FuzzRegression, FailedInferenceStopsBeforeOnnxDataPropagation) {
  const std::string message = error_of("fuzz_model_proto", "gather_axis_1_then_data_propagation.onnx");
  EXPECT_NE(message.find("model.onnx: ONNX shape inference fails:"), std::string::npos) << message;
  EXPECT_NE(message.find("(op_type:Gather): [ShapeInferenceError] axis must be in [-r, r-1]"), std::string::npos)
      << message;
}

// An .npz member's .npy header was allocated before its size was checked (400 GB), and a size beyond
// int64 threw std::out_of_range from std::stoll.
TEST_F(FuzzRegression, NpzMemberShapesBeyondTheirBytesAreRefused) {
  std::string message = error_of("fuzz_npy", "shape_1e11_no_data.npy", 1);
  EXPECT_NE(message.find("member x.npy (100000000000) expected 400000000000 bytes, got 0"), std::string::npos)
      << message;
  message = error_of("fuzz_npy", "shape_beyond_int64.npy", 1);
  EXPECT_NE(
      message.find("member x.npy: the .npy header's shape (99999999999999999999,) holds more bytes than a file can"),
      std::string::npos)
      << message;
  message = error_of("fuzz_npy", "shape_beyond_int64.npy", 0);
  EXPECT_NE(message.find("input.npy: the .npy header's shape (99999999999999999999,) holds more bytes"),
            std::string::npos)
      << message;
}

// std::regex recursed once per header character: a 30 kB .npy header overflowed the stack under ASan.
TEST_F(FuzzRegression, NpyHeaderLongerThanNumpysLimitIsRefused) {
  std::string message = error_of("fuzz_npy", "header_30kb_regex_stack.npy", 0);
  EXPECT_NE(message.find("input.npy: the .npy header is 30056 bytes, more than numpy's limit of 10000"),
            std::string::npos)
      << message;
  message = error_of("fuzz_npy", "header_30kb_regex_stack.npy", 1);
  EXPECT_NE(message.find("member x.npy: the .npy header is 30056 bytes, more than numpy's limit of 10000"),
            std::string::npos)
      << message;
}

// The zip directory's uncompressed size was allocated before inflating (3 GB for a 76-byte member).
TEST_F(FuzzRegression, NpzMemberClaimingMoreThanDeflateCanHoldIsRefused) {
  const std::string message = error_of("fuzz_npz", "deflated_member_claims_3gb.npz");
  EXPECT_NE(
      message.find("data.npz: member x.npy claims 3000000000 bytes uncompressed, more than its 76 deflated bytes"),
      std::string::npos)
      << message;
}

// A zip64 compressed size of 2^64 - 65536 wrapped the bounds check, and substr threw std::out_of_range.
TEST_F(FuzzRegression, NpzMemberSizeWrappingPastTheEndIsRefused) {
  const std::string message = error_of("fuzz_npz", "member_size_wraps_past_end.npz");
  EXPECT_NE(message.find("data.npz: truncated file: member x.npy expected 18446744073709486080 bytes, got 0"),
            std::string::npos)
      << message;
}

}  // namespace

// An empty name at a required input position (Reshape's data, in a model whose opset 21 Debian's ONNX
// checker does not know) reached Reshape's inference, which read the absent value: an internal error.
TEST_F(FuzzRegression, EmptyRequiredInputIsRefusedNamingTheNode) {
  const std::string message = error_of("fuzz_model_proto", "required_input_0_empty_opset21.onnx");
  EXPECT_NE(message.find("node 'Reshape_0' (op Reshape"), std::string::npos) << message;
  EXPECT_NE(message.find("input 0 is required but empty"), std::string::npos) << message;
}

// GPT-2's attention Split with sizes 64, 2^47+64, 64: ONNX 1.12's inference fails on it only once data
// propagation knows the axis, and the next nodes' propagators read the type it never set (a segfault in
// libonnx). That pass now runs in a forked child first; its crash is this Error.
TEST_F(FuzzRegression, OnnxDataPropagationCrashIsAnError) {
  const std::string message = error_of("fuzz_model_bytes", "gpt2_split_sizes_not_adding_up.onnx");
  EXPECT_NE(
      message.find("model.onnx: ONNX shape inference fails: with data propagation, ONNX 1.12 crashes on this model"),
      std::string::npos)
      << message;
}

// Constant-input Range and ConstantOfShape nodes whose outputs need terabytes (the first found by
// fuzz_model_bytes: a Range of 0x7a800000088 bytes folded at import, an ASan abort): made by
// tests/data/fuzz_sources/make_huge_constant_models.py. Folding declines them, so the model imports with
// the node kept, and any allocation of that size is an Error naming the shape, not a wrapped count.
TEST_F(FuzzRegression, HugeConstantOutputsAreNotFoldedAtImport) {
  for (const char* file : {"huge_range_int64_2e40.onnx", "huge_range_int64_full_span.onnx",
                           "huge_range_float_1e30.onnx", "huge_constant_of_shape_2e20_squared.onnx"}) {
    write("model.onnx", bytes_of(kFindings / "fuzz_model_bytes" / file));
    ImportedModel model = import_model((dir_ / "model.onnx").string());
    EXPECT_EQ(model.folded_nodes, 0) << file;
    EXPECT_EQ(model.graph.node_count(), 1u) << file;
  }
  try {
    Tensor(DType::Int64, {int64_t{1} << 40});
    ADD_FAILURE() << "a 8 TiB tensor was allocated";
  } catch (const Error& e) {
    EXPECT_NE(e.describe().find("a tensor of shape [1099511627776] (int64) needs more than 512 GiB of memory"),
              std::string::npos)
        << e.describe();
  }
  EXPECT_THROW(Tensor(DType::Float32, {int64_t{1} << 40, int64_t{1} << 40}), Error);  // the count overflows
}
