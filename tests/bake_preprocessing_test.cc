// --bake-normalization's graph rewrite (frontend/bake_preprocessing.h): which nodes go first, the input's
// new type, the statistics' shapes, and the refusals. tests/ort_inference_test.py checks the numbers in
// ONNX Runtime (raw uint8 images through the baked model give the plain model's logits).
#include "frontend/bake_preprocessing.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "frontend/model_file.h"
#include "graph/error.h"

namespace onnxtrain {
namespace {

const std::string kCnn = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/cnn_opset17.onnx";  // input (batch,1,28,28)
const std::string kBigram = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/lm/bigram_lm.onnx";  // int64 ids

const onnx::TensorProto& initializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer())
    if (t.name() == name) return t;
  throw Error("no initializer " + name);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(BakePreprocessing, Uint8ImagesGetCastScaleAndPerChannelNormalisationFirst) {
  onnx::ModelProto model = read_model_file(kCnn);
  const int nodes_before = model.graph().node_size();
  const std::string first_reader = model.graph().node(0).name();
  const InputPreprocessing p{.input = "input", .raw_uint8 = true, .scale = 1.0f / 255, .mean = {0.25f}, .std = {0.5f}};
  EXPECT_EQ(bake_preprocessing(model, p, "cnn.onnx"), 4);
  const onnx::GraphProto& g = model.graph();
  ASSERT_EQ(g.node_size(), nodes_before + 4);
  EXPECT_EQ(g.input(0).name(), "input");
  EXPECT_EQ(g.input(0).type().tensor_type().elem_type(), onnx::TensorProto::UINT8);
  const std::vector<std::string> ops = {g.node(0).op_type(), g.node(1).op_type(), g.node(2).op_type(),
                                        g.node(3).op_type()};
  EXPECT_EQ(ops, (std::vector<std::string>{"Cast", "Mul", "Sub", "Div"}));
  EXPECT_EQ(g.node(0).input(0), "input");
  for (int i = 1; i < 4; ++i) EXPECT_EQ(g.node(i).input(0), g.node(i - 1).output(0)) << i;
  // The model's own first node now reads the normalised values, not the raw input.
  EXPECT_EQ(g.node(4).name(), first_reader);
  EXPECT_EQ(g.node(4).input(0), g.node(3).output(0));
  for (int i = 4; i < g.node_size(); ++i)
    for (const std::string& in : g.node(i).input()) EXPECT_NE(in, "input") << g.node(i).name();
  EXPECT_EQ(initializer(g, g.node(2).input(1)).dims_size(), 0) << "one channel: a scalar mean";
  EXPECT_FLOAT_EQ(initializer(g, g.node(3).input(1)).float_data(0), 0.5f);
}

TEST(BakePreprocessing, SeveralChannelsAreShapedAlongAxisOneAndIdentityBakesNothing) {
  onnx::ModelProto model = read_model_file(kCnn);
  model.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(1)
      ->set_dim_value(3);
  const InputPreprocessing p{.input = "input", .mean = {0.1f, 0.2f, 0.3f}, .std = {1, 2, 3}};
  EXPECT_EQ(bake_preprocessing(model, p, "cnn.onnx"), 2) << "float data, scale 1: Sub and Div only";
  const onnx::TensorProto& mean = initializer(model.graph(), model.graph().node(0).input(1));
  EXPECT_EQ(std::vector<int64_t>(mean.dims().begin(), mean.dims().end()), (std::vector<int64_t>{1, 3, 1, 1}));
  EXPECT_EQ(model.graph().input(0).type().tensor_type().elem_type(), onnx::TensorProto::FLOAT);

  onnx::ModelProto untouched = read_model_file(kCnn);
  EXPECT_EQ(bake_preprocessing(untouched, {.input = "input"}, "cnn.onnx"), 0);
  EXPECT_EQ(untouched.SerializeAsString(), read_model_file(kCnn).SerializeAsString());
}

TEST(BakePreprocessing, IntegerInputsAndStatisticsThatDoNotFitAreRefused) {
  onnx::ModelProto lm = read_model_file(kBigram);
  const std::string ids = lm.graph().input(0).name();
  EXPECT_NE(error_of([&] {
              bake_preprocessing(lm, {.input = ids, .scale = 0.5f}, "lm.onnx");
            }).find("lm.onnx: --bake-normalization: the input '" + ids + "' is not float32"),
            std::string::npos);
  onnx::ModelProto cnn = read_model_file(kCnn);
  EXPECT_NE(error_of([&] {
              bake_preprocessing(cnn, {.input = "pixels", .scale = 0.5f}, "cnn.onnx");
            }).find("the model has no graph input 'pixels'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              bake_preprocessing(cnn, {.input = "input", .mean = {0.1f, 0.2f}, .std = {1}}, "cnn.onnx");
            }).find("2 channel statistics do not fit the input 'input'"),
            std::string::npos);
}

TEST(BakePreprocessing, BakedMetadataLeaveNothingToApply) {
  const std::map<std::string, std::string> before = {{"onnxtrain.preprocess", "x = (raw * scale - mean[c]) / std[c]"},
                                                     {"onnxtrain.preprocess.scale", "0.00392156863"},
                                                     {"onnxtrain.preprocess.mean", "0.25"},
                                                     {"onnxtrain.preprocess.std", "0.5"},
                                                     {"onnxtrain.classes", "10"}};
  const auto after = baked_preprocessing_metadata(
      before, {.input = "input", .raw_uint8 = true, .scale = 0.5f, .mean = {0.25f}, .std = {0.5f}});
  EXPECT_EQ(after.at("onnxtrain.preprocess.scale"), "1");
  EXPECT_EQ(after.count("onnxtrain.preprocess.mean") + after.count("onnxtrain.preprocess.std"), 0u);
  EXPECT_EQ(after.at("onnxtrain.preprocess.baked"), "x = (float(raw) * 0.5 - mean[c]) / std[c], mean 0.25, std 0.5");
  EXPECT_EQ(after.at("onnxtrain.classes"), "10");
  EXPECT_EQ(after.at("onnxtrain.preprocess").rfind("none: feed raw uint8 values", 0), 0u);
}

}  // namespace
}  // namespace onnxtrain
