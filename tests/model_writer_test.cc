// The trained model as written: inference mode (BatchNormalization without training_mode and its
// running-statistics outputs, Dropout without its training_mode input), metadata_props, and the
// training-mode form kept on request. ONNX Runtime runs such a file in tests/ort_inference_test.py.
#include "frontend/model_writer.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "frontend/model_file.h"
#include "graph/error.h"
#include "tests/child_process.h"

using namespace onnxtrain;
namespace fs = std::filesystem;

namespace {

onnx::TensorProto float_tensor(const std::string& name, std::vector<int64_t> dims, float value) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) t.add_dims(d), n *= d;
  for (int64_t i = 0; i < n; ++i) t.add_float_data(value);
  return t;
}

void add_value_info(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name,
                    onnx::TensorProto::DataType type, std::vector<int64_t> dims) {
  onnx::ValueInfoProto* v = list->Add();
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(type);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

// x (2,3,4,4) → BatchNormalization (opset 15, training_mode=1, running statistics out) → Dropout with a
// constant training_mode=true (an initializer) → y, as torch.onnx exports a module in train() state.
onnx::ModelProto training_mode_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(15);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("train_mode");
  add_value_info(g->mutable_input(), "x", onnx::TensorProto::FLOAT, {2, 3, 4, 4});
  add_value_info(g->mutable_output(), "y", onnx::TensorProto::FLOAT, {2, 3, 4, 4});
  for (const auto& [name, value] :
       {std::pair{"bn.weight", 1.0f}, {"bn.bias", 0.0f}, {"bn.running_mean", 0.0f}, {"bn.running_var", 1.0f}})
    *g->add_initializer() = float_tensor(name, {3}, value);
  *g->add_initializer() = float_tensor("ratio", {}, 0.5f);
  onnx::TensorProto mode;
  mode.set_name("train_flag");
  mode.set_data_type(onnx::TensorProto::BOOL);
  mode.add_int32_data(1);
  *g->add_initializer() = mode;

  onnx::NodeProto* bn = g->add_node();
  bn->set_name("bn");
  bn->set_op_type("BatchNormalization");
  for (const char* in : {"x", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}) bn->add_input(in);
  for (const char* out : {"h", "mean_out", "var_out"}) bn->add_output(out);
  onnx::AttributeProto* attr = bn->add_attribute();
  attr->set_name("training_mode");
  attr->set_type(onnx::AttributeProto::INT);
  attr->set_i(1);

  onnx::NodeProto* drop = g->add_node();
  drop->set_name("drop");
  drop->set_op_type("Dropout");
  for (const char* in : {"h", "ratio", "train_flag"}) drop->add_input(in);
  drop->add_output("y");
  return m;
}

const onnx::NodeProto& node_named(const onnx::ModelProto& m, const std::string& name) {
  for (const onnx::NodeProto& n : m.graph().node())
    if (n.name() == name) return n;
  throw std::runtime_error("no node " + name);
}

bool has_attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return true;
  return false;
}

bool has_initializer(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return true;
  return false;
}

TEST(SetInferenceMode, BatchNormAndDropoutAsEvalWouldExportThem) {
  onnx::ModelProto m = training_mode_model();
  EXPECT_EQ(set_inference_mode(m, "m.onnx"), 2);
  const onnx::NodeProto& bn = node_named(m, "bn");
  EXPECT_FALSE(has_attribute(bn, "training_mode"));
  ASSERT_EQ(bn.output_size(), 1);
  EXPECT_EQ(bn.output(0), "h");
  const onnx::NodeProto& drop = node_named(m, "drop");
  ASSERT_EQ(drop.input_size(), 2);
  EXPECT_EQ(drop.input(1), "ratio");
  EXPECT_FALSE(has_initializer(m, "train_flag")) << "the mode constant nothing reads any more is gone";
  EXPECT_TRUE(has_initializer(m, "ratio"));
  EXPECT_EQ(set_inference_mode(m, "m.onnx"), 0) << "a second pass finds nothing to change";
}

TEST(SetInferenceMode, ADropoutModeThatIsAGraphInputStaysTheCallersChoice) {
  onnx::ModelProto m = training_mode_model();
  onnx::GraphProto* g = m.mutable_graph();
  g->mutable_initializer()->RemoveLast();  // train_flag becomes a graph input
  add_value_info(g->mutable_input(), "train_flag", onnx::TensorProto::BOOL, {});
  set_inference_mode(m, "m.onnx");
  EXPECT_EQ(node_named(m, "drop").input_size(), 3);
}

TEST(SetInferenceMode, ARunningStatisticReadElsewhereIsAClearError) {
  onnx::ModelProto m = training_mode_model();
  add_value_info(m.mutable_graph()->mutable_output(), "mean_out", onnx::TensorProto::FLOAT, {3});
  try {
    set_inference_mode(m, "m.onnx");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("m.onnx"), std::string::npos) << what;
    EXPECT_NE(what.find("node 'bn' (op BatchNormalization)"), std::string::npos) << what;
    EXPECT_NE(what.find("'mean_out'"), std::string::npos) << what;
    EXPECT_NE(what.find("--keep-training-mode"), std::string::npos) << what;
  }
}

// Before opset 14 training mode is the presence of outputs after Y (mean, var, saved mean, saved var).
TEST(SetInferenceMode, Opset9BatchNormLosesItsTrainingOutputs) {
  onnx::ModelProto m = training_mode_model();
  m.mutable_opset_import(0)->set_version(9);
  onnx::NodeProto* bn = m.mutable_graph()->mutable_node(0);
  bn->clear_attribute();
  bn->add_output("saved_mean");
  bn->add_output("saved_var");
  m.mutable_graph()->mutable_node(1)->mutable_input()->RemoveLast();  // Dropout-7 has no mode input
  m.mutable_graph()->mutable_node(1)->mutable_input()->RemoveLast();
  EXPECT_EQ(set_inference_mode(m, "m.onnx"), 1);
  EXPECT_EQ(node_named(m, "bn").output_size(), 1);
}

class WrittenModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("onnxtrain_model_writer_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    source_ = (dir_ / "source.onnx").string();
    std::ofstream(source_, std::ios::binary) << training_mode_model().SerializeAsString();
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string source_;
};

TEST_F(WrittenModel, IsInInferenceModeWithItsMetadataAndTrainedData) {
  const std::string out = (dir_ / "out.onnx").string();
  Tensor mean(DType::Float32, {3});
  mean.data<float>()[1] = 0.25f;
  write_trained_model(source_, out, {{"bn.running_mean", mean}},
                      {.metadata = {{"onnxtrain.preprocess.mean", "0.5"}, {"onnxtrain.classes", "3"}}});
  const onnx::ModelProto m = read_model_file(out);
  EXPECT_FALSE(has_attribute(node_named(m, "bn"), "training_mode"));
  EXPECT_EQ(node_named(m, "drop").input_size(), 2);
  std::map<std::string, std::string> props;
  for (const auto& p : m.metadata_props()) props[p.key()] = p.value();
  EXPECT_EQ(props["onnxtrain.preprocess.mean"], "0.5");
  EXPECT_EQ(props["onnxtrain.classes"], "3");
  for (const auto& t : m.graph().initializer()) {
    if (t.name() != "bn.running_mean") continue;
    ASSERT_EQ(t.raw_data().size(), 12u);
    float values[3];
    std::memcpy(values, t.raw_data().data(), 12);
    EXPECT_EQ(values[1], 0.25f);
  }
}

TEST_F(WrittenModel, KeepsTrainingModeOnRequest) {
  const std::string out = (dir_ / "out.onnx").string();
  write_trained_model(source_, out, {}, {.inference_mode = false});
  const onnx::ModelProto m = read_model_file(out);
  EXPECT_TRUE(has_attribute(node_named(m, "bn"), "training_mode"));
  EXPECT_EQ(node_named(m, "bn").output_size(), 3);
  EXPECT_EQ(node_named(m, "drop").input_size(), 3);
}

// A full disk (RLIMIT_FSIZE here, EFBIG) is "OUT: write failed: <strerror>"; the model OUT held before
// stays, and no temporary file is left beside it (was: a truncated model, exit 0).
TEST_F(WrittenModel, AFailedWriteIsAnErrorAndKeepsTheOldModel) {
  const std::string out = (dir_ / "out.onnx").string();
  std::ofstream(out, std::ios::binary) << "the previous model";
  const testing_support::ChildResult r = testing_support::run_in_child([&] {
    testing_support::limit_file_size(64);
    try {
      write_trained_model(source_, out, {}, {});
      return std::string("no error");
    } catch (const Error& e) {
      return std::string(e.what());
    }
  });
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.message, out + ": write failed: File too large");
  std::ifstream in(out, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "the previous model");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"out.onnx", "source.onnx"}));
}

}  // namespace
