// The InferenceSession (executor/) and .npy files (frontend/): fixtures give ONNX Runtime's logits
// (models/expected/, made by make_expected.py), inputs are validated with clear errors, and a new batch
// size re-prepares the kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "executor/inference_session.h"
#include "executor/trainer.h"
#include "frontend/importer.h"
#include "frontend/npy.h"
#include "tests/graph_builder.h"

using namespace onnxtrain;
namespace fs = std::filesystem;

namespace {

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";

void expect_close(const Tensor& got, const Tensor& expected, double rtol, double atol) {
  ASSERT_EQ(got.sizes(), expected.sizes());
  auto a = got.to_double(), b = expected.to_double();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], atol + rtol * std::abs(b[i])) << "element " << i;
}

TEST(Npy, RoundTripsEveryDtype) {
  const fs::path dir = fs::temp_directory_path() / ("onnxtrain_npy_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64, DType::Int32, DType::UInt8, DType::Bool}) {
    Tensor t(dtype, {2, 3});
    for (size_t i = 0; i < t.nbytes(); ++i) t.raw()[i] = static_cast<std::byte>(dtype == DType::Bool ? i % 2 : i * 7);
    const std::string path = (dir / "t.npy").string();
    write_npy(path, t);
    Tensor back = read_npy(path);
    EXPECT_EQ(back.dtype(), dtype);
    EXPECT_EQ(back.sizes(), t.sizes());
    EXPECT_EQ(0, std::memcmp(back.raw(), t.raw(), t.nbytes()));
  }
  Tensor scalar = Tensor::scalar_int64(42);
  write_npy((dir / "s.npy").string(), scalar);
  EXPECT_EQ(read_npy((dir / "s.npy").string()).to_int64(), std::vector<int64_t>{42});
  EXPECT_TRUE(read_npy((dir / "s.npy").string()).sizes().empty());
  fs::remove_all(dir);
}

TEST(Npy, RefusesBadFiles) {
  EXPECT_THROW(read_npy("/nonexistent.npy"), Error);
  EXPECT_THROW(read_npy(kModels + "fixtures.json"), Error);
  try {
    read_npy(kModels + "cnn_opset17.onnx");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cnn_opset17.onnx"), std::string::npos);
  }
  // Issue 22: a header whose shape × itemsize overflows (was a segfault) or exceeds the file is refused
  // before anything is allocated.
  const std::string dir = ::testing::TempDir();
  auto npy_with_shape = [&](const std::string& name, const std::string& shape) {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
    header += std::string(63 - header.size() % 64, ' ') + "\n";
    const std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::binary);
    out << "\x93NUMPY" << '\x01' << '\x00' << static_cast<char>(header.size() & 0xff)
        << static_cast<char>(header.size() >> 8) << header << std::string(16, '\0');
    return path;
  };
  for (const std::string shape : {"(4611686018427387904, 1, 28, 28)", "(2305843009213693952,)",
                                  "(99999999999999999999999,)", "(1000000000, 1000000000)"}) {
    try {
      read_npy(npy_with_shape("huge.npy", shape));
      ADD_FAILURE() << shape << " was read";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("huge.npy"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(read_npy(npy_with_shape("four.npy", "(4,)")).numel(), 4);
}

class MatchesOnnxRuntime : public ::testing::TestWithParam<std::string> {};

TEST_P(MatchesOnnxRuntime, Logits) {
  const std::string name = GetParam();
  ImportedModel model = import_model(kModels + name + ".onnx");
  const Tensor x = read_npy(kModels + "expected/fashion_batch3_input.npy");
  const Tensor expected = read_npy(kModels + "expected/" + name + "_logits.npy");
  for (const std::string implementation : {"", "reference"}) {
    InferenceSession session(model.graph, implementation);
    auto outputs = session.run({{model.graph.value(model.graph.inputs[0]).name, x}});
    ASSERT_EQ(outputs.size(), 1u);
    expect_close(outputs.begin()->second, expected, 1e-4, 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MatchesOnnxRuntime,
                         ::testing::Values("cnn_opset13", "cnn_opset17", "cnn_dynamo", "mlp_opset17", "mlp_dynamo"));

TEST(InferenceSession, NewBatchSizeRepreparesAndAgrees) {
  ImportedModel model = import_model(kModels + "cnn_opset17.onnx");
  const Tensor x = read_npy(kModels + "expected/fashion_batch3_input.npy");
  const Tensor expected = read_npy(kModels + "expected/cnn_opset17_logits.npy");
  InferenceSession session(model.graph);
  session.run({{"input", x}});
  // Sample 1 alone (batch 1) gives row 1 of the batch-3 logits.
  Tensor one(DType::Float32, {1, 1, 28, 28});
  std::memcpy(one.raw(), x.raw() + 784 * sizeof(float), 784 * sizeof(float));
  Tensor row = session.run({{"input", one}}).at("logits");
  Tensor expected_row(DType::Float32, {1, 10});
  std::memcpy(expected_row.raw(), expected.raw() + 10 * sizeof(float), 10 * sizeof(float));
  expect_close(row, expected_row, 1e-4, 1e-5);
}

// A recycled output's buffer holds the next run's output; one whose buffer a copy still shares is never
// handed out again (the copy keeps its values).
TEST(InferenceSession, RecycledOutputsServeTheNextRunButSharedOnesAreKept) {
  ImportedModel model = import_model(kModels + "cnn_opset17.onnx");
  const Tensor x = read_npy(kModels + "expected/fashion_batch3_input.npy");
  InferenceSession session(model.graph);
  Tensor first = session.run({{"input", x}}).at("logits");
  const Tensor expected = first.clone();
  const std::byte* buffer = first.raw();
  session.recycle(std::move(first));
  Tensor second = session.run({{"input", x}}).at("logits");
  EXPECT_EQ(second.raw(), buffer) << "the recycled buffer was not reused";
  expect_close(second, expected, 0, 0);

  const Tensor copy = second;  // shares the buffer
  session.recycle(std::move(second));
  Tensor third = session.run({{"input", x}}).at("logits");
  EXPECT_NE(third.raw(), copy.raw()) << "a buffer still in use was handed out again";
  expect_close(copy, expected, 0, 0);
  expect_close(third, expected, 0, 0);
}

// Flatten, Reshape and the like hand on their input's buffer instead of a copy. The buffer goes back to the
// pool only when the last value on it is released: here the Relu's output `a` has its last reader in the
// Flatten, and the Exp's output, allocated after it, must not get a's buffer while b (a's view) is still to
// be read by the Add.
TEST(InferenceSession, ViewsKeepTheirBufferUntilTheLastReader) {
  using namespace testing_support;
  Graph g;
  const ValueId x = add_input(g, "x", {4, 6});
  const ValueId a = add_inferred_node(g, "relu", "Relu", {x}, "a");
  const ValueId b = add_inferred_node(g, "flatten", "Flatten", {a}, "b", {{"axis", int64_t{0}}});
  const ValueId c = add_inferred_node(g, "exp", "Exp", {b}, "c");
  g.outputs.push_back(add_inferred_node(g, "add", "Add", {b, c}, "y"));
  g.sort();
  const Tensor input = uniform_tensor({4, 6}, 3);
  InferenceSession session(g);
  for (int run = 0; run < 3; ++run) {  // later runs take their buffers from the pool
    const Tensor y = session.run({{"x", input}}).at("y");
    ASSERT_EQ(y.sizes(), (std::vector<int64_t>{1, 24}));
    for (int64_t i = 0; i < 24; ++i) {
      const float relu = std::max(input.data<float>()[i], 0.0f);
      EXPECT_NEAR(y.data<float>()[i], relu + std::exp(relu), 1e-6) << "run " << run << ", element " << i;
    }
  }
}

// torchvision's VisionTransformer, exported by TorchScript (models/torchvision/make_torchvision.py: 2 layers
// of width 64): its attention computes shapes with Mod, which onnxtrain could not run before 2026-12-05.
// The logits match torch's for the same input, and ten momentum steps on that batch lower the loss.
TEST(InferenceSession, TorchvisionVitMatchesTorchAndTrains) {
  ImportedModel model = import_model(kModels + "torchvision/vit_tiny.onnx");
  const Tensor x = read_npy(kModels + "torchvision/vit_tiny_input.npy");
  const Tensor expected = read_npy(kModels + "torchvision/vit_tiny_logits.npy");
  InferenceSession session(model.graph);
  expect_close(session.run({{"input", x}}).at("logits"), expected, 1e-4, 1e-5);

  TrainerOptions options{.loss = parse_loss_spec("cross-entropy")};
  options.schedule = {.base_lr = 0.05};
  Trainer trainer(model.graph, options);
  Tensor labels(DType::Int64, {4});
  for (int64_t i = 0; i < 4; ++i) labels.data<int64_t>()[i] = i;
  const float first = trainer.train_step(x, labels);
  float last = first;
  for (int step = 0; step < 10; ++step) last = trainer.train_step(x, labels);
  EXPECT_TRUE(std::isfinite(first));
  EXPECT_LT(last, 0.5f * first) << "loss " << first << " -> " << last;
}

TEST(InferenceSession, ValidatesInputs) {
  ImportedModel model = import_model(kModels + "cnn_opset17.onnx");
  InferenceSession session(model.graph);
  auto expect_error = [&](const std::map<std::string, Tensor>& inputs, const std::string& fragment) {
    try {
      session.run(inputs);
      ADD_FAILURE() << "accepted; expected: " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_error({}, "input 'input' (batch,1,28,28) was not given");
  expect_error({{"input", Tensor(DType::Float64, {2, 1, 28, 28})}}, "wrong element type");
  expect_error({{"input", Tensor(DType::Float32, {2, 1, 28})}}, "wrong rank");
  expect_error({{"input", Tensor(DType::Float32, {2, 3, 28, 28})}}, "wrong size in dimension 1");
  expect_error({{"input", Tensor(DType::Float32, {2, 1, 28, 28})}, {"extra", Tensor(DType::Float32, {1})}},
               "no input named 'extra'");
}

TEST(InferenceSession, NamesTheNodeWithoutAKernel) {
  ImportedModel model = import_model("/usr/share/libonnx-testdata/data/node/test_bitshift_left_uint8/model.onnx");
  InferenceSession session(model.graph);
  ASSERT_FALSE(session.missing_kernels().empty());
  Tensor x(DType::UInt8, {3}), y(DType::UInt8, {3});
  try {
    session.run({{"x", x}, {"y", y}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(e.has_node());
    EXPECT_EQ(e.op_type(), "BitShift");
    EXPECT_NE(std::string(e.what()).find("no CPU kernel"), std::string::npos) << e.what();
  }
}

}  // namespace
