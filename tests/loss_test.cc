// attach_loss (graph/autodiff/loss.h): every loss kind and reduction against PyTorch (loss value and
// d loss / d logits from tests/data/loss/make_loss_fixtures.py), run through build_training_graph with
// both the fastest and the reference kernels; cross-entropy on the exported CNN; the user errors.
#include "graph/autodiff/loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <ostream>
#include <random>

#include "executor/inference_session.h"
#include "frontend/importer.h"
#include "frontend/npy.h"
#include "graph/autodiff/training_graph.h"
#include "graph/op_schema.h"
#include "tests/error_of.h"

using namespace onnxtrain;

namespace {

const std::string kSource = ONNXTRAIN_SOURCE_DIR;
const std::string kFixtures = kSource + "/tests/data/loss/";

using testing_support::error_of;

// A graph whose only output is its input "logits", shaped (batch, sizes[1:]) with a symbolic batch.
Graph logits_graph(const std::vector<int64_t>& sizes, DType dtype = DType::Float32) {
  Graph g;
  std::vector<Dim> dims = {Dim::symbol("batch")};
  for (size_t i = 1; i < sizes.size(); ++i) dims.emplace_back(sizes[i]);
  ValueId x = g.add_value({.name = "logits", .dtype = dtype, .shape = Shape(dims), .role = ValueRole::Input});
  g.inputs.push_back(x);
  g.outputs.push_back(x);
  return g;
}

void expect_close(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  std::span<const float> a = actual.data<float>(), e = expected.data<float>();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], e[i], 1e-5 * std::abs(e[i]) + 1e-7) << what << " element " << i;
  }
}

Tensor to_int32(const Tensor& t) {
  Tensor out(DType::Int32, t.sizes());
  std::vector<int64_t> values = t.to_int64();
  for (size_t i = 0; i < values.size(); ++i) out.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
  return out;
}

struct ParityCase {
  std::string fixture;  // tests/data/loss/<fixture>_{logits,target,loss,grad}.npy
  std::string loss;     // parse_loss_spec text
  std::string reduction;
  DType label_dtype = DType::Int64;
  bool classes_last = false;  // (N, T, V) logits, as language models write them
  double label_smoothing = 0;
};

void PrintTo(const ParityCase& c, std::ostream* os) {
  *os << c.fixture << " (" << c.loss << ", " << c.reduction << ")";
}

std::string case_name(const ::testing::TestParamInfo<ParityCase>& info) {
  return info.param.fixture + (info.param.label_dtype == DType::Int32 ? "_int32" : "");
}

class MatchesPyTorch : public ::testing::TestWithParam<ParityCase> {};

TEST_P(MatchesPyTorch, LossAndLogitGradient) {
  const ParityCase& c = GetParam();
  const Tensor logits = read_npy(kFixtures + c.fixture + "_logits.npy");
  Tensor target = read_npy(kFixtures + c.fixture + "_target.npy");
  if (c.label_dtype == DType::Int32) target = to_int32(target);
  const Tensor expected_loss = read_npy(kFixtures + c.fixture + "_loss.npy");
  const Tensor expected_grad = read_npy(kFixtures + c.fixture + "_grad.npy");

  Graph g = logits_graph(logits.sizes());
  LossSpec spec = parse_loss_spec(c.loss);
  spec.reduction = parse_loss_reduction(c.reduction);
  spec.label_dtype = c.label_dtype;
  spec.classes_last = c.classes_last;
  spec.label_smoothing = c.label_smoothing;
  AttachedLoss attached = attach_loss(g, spec);
  EXPECT_EQ(attached.loss, "loss");
  EXPECT_EQ(attached.labels, "labels");
  EXPECT_EQ(attached.logits, "logits");
  const Value& loss = g.value(attached.loss_value);
  EXPECT_EQ(loss.dtype, DType::Float32);
  EXPECT_EQ(loss.shape, Shape()) << "the loss is a scalar: " << loss.shape.to_string();
  const Value& labels = g.value(attached.labels_value);
  EXPECT_EQ(labels.dtype, target.dtype());
  ASSERT_EQ(labels.shape.rank(), target.rank());
  EXPECT_TRUE(labels.shape.dims[0].is_symbolic()) << "the labels keep the symbolic batch";

  TrainingGraph t = build_training_graph(g, {.loss = attached.loss, .wrt = {"logits"}});
  ASSERT_EQ(t.gradients.size(), 1u);
  const std::string grad_name = t.graph.value(t.gradients[0].gradient).name;
  for (const std::string implementation : {"", "reference"}) {
    SCOPED_TRACE("kernels: " + (implementation.empty() ? std::string("fastest") : implementation));
    auto out = InferenceSession(t.graph, implementation).run({{"logits", logits}, {attached.labels, target}});
    if (spec.reduction == LossReduction::None) {
      expect_close(out.at(attached.per_element), expected_loss, "per-element losses");
      double sum = 0;
      for (float v : expected_loss.data<float>()) sum += v;
      EXPECT_NEAR(out.at("loss").data<float>()[0], sum, 1e-5 * std::abs(sum));
    } else {
      expect_close(out.at("loss"), expected_loss, "loss");
    }
    expect_close(out.at(grad_name), expected_grad, "d loss / d logits");
  }
}

std::vector<ParityCase> parity_cases() {
  std::vector<ParityCase> cases;
  for (const std::string r : {"mean", "sum", "none"}) {
    cases.push_back({"sce_" + r, "cross-entropy", r});
    cases.push_back({"sce_ignore_" + r, "cross-entropy", r});
    cases.push_back({"sce_spatial_" + r, "cross-entropy", r});
    cases.push_back({"sce_tokens_" + r, "cross-entropy", r, DType::Int64, true});
    cases.push_back({"mse_" + r, "mse", r});
    cases.push_back({"l1_" + r, "l1", r});
    cases.push_back({"bce_" + r, "bce-with-logits", r});
    cases.push_back({"sce_smooth_" + r, "cross-entropy", r, DType::Int64, false, 0.1});
    cases.push_back({"sce_tokens_smooth_" + r, "cross-entropy", r, DType::Int64, true, 0.1});
  }
  cases.push_back({"sce_mean", "cross-entropy", "mean", DType::Int32});
  cases.push_back({"sce_ignore_sum", "cross-entropy", "sum", DType::Int32});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Losses, MatchesPyTorch, ::testing::ValuesIn(parity_cases()), case_name);

TEST(AttachLoss, CrossEntropyTrainsEveryParameterOfTheCnn) {
  ImportedModel model = import_model(kSource + "/models/cnn_opset17.onnx");
  size_t parameters = 0;
  for (ValueId v : model.graph.initializers) parameters += model.graph.value(v).role == ValueRole::Parameter;
  AttachedLoss attached = attach_loss(model.graph, parse_loss_spec("cross-entropy"));
  EXPECT_EQ(attached.logits, "logits") << "the loss attaches to the first output by default";
  TrainingGraph t = build_training_graph(model.graph, {.loss = attached.loss});
  EXPECT_TRUE(t.unreachable.empty());
  ASSERT_EQ(t.gradients.size(), parameters);
  ASSERT_GT(parameters, 0u);

  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  Tensor x(DType::Float32, {4, 1, 28, 28});
  for (float& v : x.data<float>()) v = normal(rng);
  Tensor labels(DType::Int64, {4});
  for (int64_t i = 0; i < 4; ++i) labels.data<int64_t>()[i] = (3 * i + 1) % 10;
  auto out = InferenceSession(t.graph).run({{"input", x}, {attached.labels, labels}});

  // The loss is the mean cross-entropy of the logits the same run returns.
  const Tensor& logits = out.at("logits");
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{4, 10}));
  double expected = 0;
  for (int64_t n = 0; n < 4; ++n) {
    const float* row = logits.data<float>().data() + n * 10;
    double max = row[0], sum = 0;
    for (int c = 1; c < 10; ++c) max = std::max<double>(max, row[c]);
    for (int c = 0; c < 10; ++c) sum += std::exp(row[c] - max);
    expected += (std::log(sum) + max - row[labels.data<int64_t>()[n]]) / 4;
  }
  EXPECT_NEAR(out.at("loss").data<float>()[0], expected, 1e-5 * expected);
  for (const TrainingGraph::Gradient& gr : t.gradients) {
    const Tensor& grad = out.at(t.graph.value(gr.gradient).name);
    EXPECT_EQ(grad.sizes(), t.graph.value(gr.value).data->sizes()) << t.graph.value(gr.value).name;
    double norm = 0;
    for (float v : grad.data<float>()) norm += static_cast<double>(v) * v;
    EXPECT_TRUE(std::isfinite(norm) && norm > 0) << t.graph.value(gr.value).name << " gets no gradient";
  }
}

TEST(AttachLoss, ModelOutputIsUsedAsItIs) {
  Graph g = logits_graph({1, 3});
  ValueId total = g.add_value({.name = "my_loss"});
  NodeId n = g.add_node({.name = "sum",
                         .op_type = "ReduceSum",
                         .opset = 17,
                         .inputs = {g.inputs[0]},
                         .outputs = {total},
                         .attributes = {{"keepdims", int64_t{0}}}});
  infer_node(g, n, *OpRegistry::builtin().find("", "ReduceSum"));
  const size_t nodes = g.node_count();
  AttachedLoss attached = attach_loss(g, parse_loss_spec("output:my_loss"));
  EXPECT_EQ(attached.loss, "my_loss");
  EXPECT_TRUE(attached.labels.empty());
  EXPECT_EQ(g.node_count(), nodes) << "no nodes added";
  EXPECT_EQ(g.outputs.back(), total) << "the loss becomes a graph output";
  TrainingGraph t = build_training_graph(g, {.loss = attached.loss, .wrt = {"logits"}});
  Tensor x(DType::Float32, {2, 3});
  auto out = InferenceSession(t.graph, "reference").run({{"logits", x}});
  for (float v : out.at("logits_grad").data<float>()) EXPECT_EQ(v, 1.0f);
}

TEST(AttachLoss, NamesDoNotCollideWithTheModels) {
  Graph g = logits_graph({1, 3});
  g.value(g.inputs[0]).name = "labels";  // a model whose output happens to be called "labels"
  AttachedLoss attached = attach_loss(g, parse_loss_spec("mse"));
  EXPECT_EQ(attached.logits, "labels");
  EXPECT_EQ(attached.labels, "labels_1");
  EXPECT_EQ(attached.loss, "loss");
  AttachedLoss second = attach_loss(g, parse_loss_spec("l1"));
  EXPECT_EQ(second.loss, "loss_1");
}

TEST(AttachLoss, AttachesToANamedOutput) {
  Graph g = logits_graph({1, 3});
  ValueId other = g.add_value({.name = "scores",
                               .dtype = DType::Float32,
                               .shape = Shape({Dim::symbol("batch"), Dim(5)}),
                               .role = ValueRole::Input});
  g.inputs.push_back(other);
  g.outputs.push_back(other);
  LossSpec spec = parse_loss_spec("cross-entropy");
  spec.attach_to = "scores";
  AttachedLoss attached = attach_loss(g, spec);
  EXPECT_EQ(attached.logits_value, other);
  EXPECT_EQ(g.value(attached.labels_value).shape, Shape({Dim::symbol("batch")}));
}

TEST(LossErrors, ParsingListsTheChoices) {
  EXPECT_EQ(parse_loss_spec("output:y").model_output, "y");
  EXPECT_EQ(parse_loss_spec("softmax-cross-entropy").kind, LossKind::SoftmaxCrossEntropy);
  EXPECT_EQ(parse_loss_spec("bce-with-logits").kind, LossKind::BinaryCrossEntropyWithLogits);
  const std::string unknown = error_of([] { parse_loss_spec("hinge"); });
  EXPECT_NE(unknown.find("'hinge'"), std::string::npos) << unknown;
  for (const char* choice : {"cross-entropy", "mse", "l1", "bce-with-logits", "output:NAME"})
    EXPECT_NE(unknown.find(choice), std::string::npos) << unknown;
  EXPECT_NE(error_of([] { parse_loss_spec("output:"); }).find("names no value"), std::string::npos);
  const std::string reduction = error_of([] { parse_loss_reduction("avg"); });
  EXPECT_NE(reduction.find("mean, sum or none"), std::string::npos) << reduction;
}

TEST(LossErrors, BadLogits) {
  Graph ints = logits_graph({1, 3}, DType::Int64);
  std::string e = error_of([&] { attach_loss(ints, parse_loss_spec("mse")); });
  EXPECT_NE(e.find("needs float logits"), std::string::npos) << e;
  EXPECT_NE(e.find("int64"), std::string::npos) << e;

  Graph vector = logits_graph({1});
  e = error_of([&] { attach_loss(vector, parse_loss_spec("cross-entropy")); });
  EXPECT_NE(e.find("(N,C) or (N,C,d1,...)"), std::string::npos) << e;
  EXPECT_NE(e.find("(batch)"), std::string::npos) << e;

  Graph g = logits_graph({1, 3});
  LossSpec spec = parse_loss_spec("cross-entropy");
  spec.label_dtype = DType::Float32;
  e = error_of([&] { attach_loss(g, spec); });
  EXPECT_NE(e.find("int64 or int32"), std::string::npos) << e;

  spec = parse_loss_spec("l1");
  spec.attach_to = "probabilities";
  e = error_of([&] { attach_loss(g, spec); });
  EXPECT_NE(e.find("'probabilities'"), std::string::npos) << e;
  EXPECT_NE(e.find("outputs are logits"), std::string::npos) << e;

  Graph empty;
  EXPECT_NE(error_of([&] { attach_loss(empty, parse_loss_spec("mse")); }).find("no outputs"), std::string::npos);
}

TEST(LossErrors, ModelOutputMustBeAFloatScalar) {
  Graph g = logits_graph({1, 3});
  std::string e = error_of([&] { attach_loss(g, parse_loss_spec("output:loss")); });
  EXPECT_NE(e.find("no value of that name"), std::string::npos) << e;
  EXPECT_NE(e.find("outputs are logits"), std::string::npos) << e;
  e = error_of([&] { attach_loss(g, parse_loss_spec("output:logits")); });
  EXPECT_NE(e.find("must be a float scalar"), std::string::npos) << e;
  EXPECT_NE(e.find("(batch,3)"), std::string::npos) << e;
  Graph ints = logits_graph({1}, DType::Int64);
  ints.value(ints.inputs[0]).shape = Shape();
  e = error_of([&] { attach_loss(ints, parse_loss_spec("output:logits")); });
  EXPECT_NE(e.find("int64 ()"), std::string::npos) << e;
}

TEST(LossErrors, LabelsOutOfRangeFailAtRunTime) {
  Graph g = logits_graph({1, 3});
  AttachedLoss attached = attach_loss(g, parse_loss_spec("cross-entropy"));
  Tensor x(DType::Float32, {2, 3});
  Tensor labels(DType::Int64, {2});
  labels.data<int64_t>()[1] = 3;
  std::string e = error_of([&] { InferenceSession(g, "reference").run({{"logits", x}, {attached.labels, labels}}); });
  EXPECT_NE(e.find("outside [0, 3)"), std::string::npos) << e;
}

}  // namespace
