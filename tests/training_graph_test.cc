// build_training_graph (graph/autodiff/): the bookkeeping around the gradient rules — k uses sum k
// contributions, unreachable parameters are reported by name, integers are never differentiated, bad
// requests are clear errors — and the training graphs of the exported fixtures, whose gradients from
// the fast kernels must match the reference kernels.
#include "graph/autodiff/training_graph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "executor/inference_session.h"
#include "frontend/importer.h"
#include "frontend/npy.h"
#include "graph/autodiff/training_recipe.h"
#include "graph/op_schema.h"
#include "tests/error_of.h"

using namespace onnxtrain;

namespace {

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";

ValueId add_node(Graph& g, const std::string& op, std::vector<ValueId> inputs, Attributes attributes = {},
                 const std::string& domain = "") {
  ValueId y = g.add_value({.name = op + "_" + std::to_string(g.value_count())});
  NodeId n = g.add_node({.name = op + "_node_" + std::to_string(g.value_count()),
                         .op_type = op,
                         .domain = domain,
                         .opset = domain.empty() ? 17 : 1,
                         .inputs = std::move(inputs),
                         .outputs = {y},
                         .attributes = std::move(attributes)});
  infer_node(g, n, *OpRegistry::builtin().find(domain, op));
  return y;
}

ValueId add_parameter(Graph& g, const std::string& name, std::vector<int64_t> sizes, float fill) {
  Tensor t(DType::Float32, sizes);
  for (float& v : t.data<float>()) v = fill;
  ValueId id = g.add_value(
      {.name = name, .dtype = DType::Float32, .shape = Shape::of(sizes), .role = ValueRole::Parameter, .data = t});
  g.initializers.push_back(id);
  return id;
}

ValueId sum_all(Graph& g, ValueId x) { return add_node(g, "ReduceSum", {x}, {{"keepdims", int64_t{0}}}); }

using testing_support::error_of;

TEST(TrainingGraph, SumsEveryUseOfAValue) {
  // loss = sum(w*w + w): dloss/dw = 2w + 1, from three contributions.
  Graph g;
  ValueId w = add_parameter(g, "w", {3}, 1.5f);
  ValueId loss = sum_all(g, add_node(g, "Add", {add_node(g, "Mul", {w, w}), w}));
  g.value(loss).name = "loss";
  TrainingGraph t = build_training_graph(g, {.loss = "loss"});
  ASSERT_EQ(t.gradients.size(), 1u);
  EXPECT_EQ(t.graph.value(t.gradients[0].gradient).name, "w_grad");
  int sums = 0;
  for (NodeId n : t.graph.order()) sums += t.graph.node(n).op_type == "Sum";
  EXPECT_EQ(sums, 1) << "the three contributions to w are summed by one node";
  auto out = InferenceSession(t.graph, "reference").run({});
  for (float v : out.at("w_grad").data<float>()) EXPECT_FLOAT_EQ(v, 4.0f);
  EXPECT_FLOAT_EQ(out.at("loss").data<float>()[0], 3 * (1.5f * 1.5f + 1.5f));
}

// A tensor split by Gathers of each index of an axis once (torch's attention: q, k, v = qkv[0], qkv[1],
// qkv[2]) gets its gradient as one Concat of the slices' gradients, not a Sum of zero-filled GatherGrads;
// a tensor gathered at an index twice keeps the Sum (the contributions overlap).
TEST(TrainingGraph, GathersOfEverySliceConcatTheirGradients) {
  auto build = [](std::vector<int64_t> indices) {
    Graph g;
    ValueId w = add_parameter(g, "w", {3, 2}, 0.0f);
    for (size_t k = 0; k < 6; ++k) g.value(w).data->data<float>()[k] = static_cast<float>(k);
    ValueId loss{};
    for (size_t k = 0; k < indices.size(); ++k) {
      ValueId index = g.add_value({.name = "index" + std::to_string(k),
                                   .dtype = DType::Int64,
                                   .shape = Shape::of({}),
                                   .role = ValueRole::Constant,
                                   .data = Tensor::scalar_int64(indices[k])});
      g.initializers.push_back(index);
      // slice k weighted by k + 1: d loss / d w[index k] = (k + 1) * 2 * w[index k]
      ValueId slice = add_node(g, "Gather", {w, index}, {{"axis", int64_t{0}}});
      ValueId scaled = add_node(
          g, "Mul", {add_node(g, "Mul", {slice, slice}), add_parameter(g, "c" + std::to_string(k), {}, k + 1.0f)});
      ValueId term = sum_all(g, scaled);
      loss = loss.valid() ? add_node(g, "Add", {loss, term}) : term;
    }
    g.value(loss).name = "loss";
    return build_training_graph(g, {.loss = "loss", .wrt = {"w"}});
  };
  auto count = [](const TrainingGraph& t, const std::string& op) {
    int n = 0;
    for (NodeId id : t.graph.order()) n += t.graph.node(id).op_type == op;
    return n;
  };
  const TrainingGraph split = build({2, 0, -2});  // each row once, in another order, one index negative
  EXPECT_EQ(count(split, "GatherGrad"), 0);
  EXPECT_EQ(count(split, "Concat"), 1);
  const std::vector<float> w = {0, 1, 2, 3, 4, 5};
  // Row 2 weighted 1, row 0 weighted 2, row 1 weighted 3.
  const std::vector<float> expected = {2 * 2 * w[0], 2 * 2 * w[1], 3 * 2 * w[2],
                                       3 * 2 * w[3], 1 * 2 * w[4], 1 * 2 * w[5]};
  for (const char* kernels : {"reference", ""}) {
    auto out = InferenceSession(split.graph, kernels).run({});
    const auto grad = out.at("w_grad").data<float>();
    for (size_t k = 0; k < 6; ++k) EXPECT_FLOAT_EQ(grad[k], expected[k]) << kernels << " element " << k;
  }
  const TrainingGraph overlapping = build({0, 0, 1});  // row 2 not gathered, row 0 twice
  EXPECT_EQ(count(overlapping, "GatherGrad"), 3);
  EXPECT_EQ(count(overlapping, "Concat"), 0);
}

// A Dropout of constant ratio 0 whose mask nobody reads trains as an Identity (no mask, no DropoutGrad);
// one of ratio 0.25 stays a Dropout, and so does a ratio-0 one whose mask is a graph output.
TEST(TrainingGraph, DropoutOfRatioZeroIsAnIdentity) {
  auto model = [](float ratio, bool mask_out) {
    Graph g;
    ValueId x =
        g.add_value({.name = "x", .dtype = DType::Float32, .shape = Shape::of({4, 3}), .role = ValueRole::Input});
    g.inputs.push_back(x);
    ValueId w = add_parameter(g, "w", {3, 5}, 0.1f);
    Tensor r(DType::Float32, {});
    r.data<float>()[0] = ratio;
    ValueId ratio_value = g.add_value(
        {.name = "ratio", .dtype = DType::Float32, .shape = Shape::of({}), .role = ValueRole::Constant, .data = r});
    g.initializers.push_back(ratio_value);
    Tensor on(DType::Bool, {});
    on.data<bool>()[0] = true;
    ValueId training = g.add_value(
        {.name = "training", .dtype = DType::Bool, .shape = Shape::of({}), .role = ValueRole::Constant, .data = on});
    g.initializers.push_back(training);
    ValueId y = g.add_value({.name = "y"}), mask = g.add_value({.name = "mask"});
    NodeId dropout = g.add_node({.name = "dropout",
                                 .op_type = "Dropout",
                                 .opset = 13,
                                 .inputs = {add_node(g, "MatMul", {x, w}), ratio_value, training},
                                 .outputs = {y, mask}});
    infer_node(g, dropout, *OpRegistry::builtin().find("", "Dropout"));
    g.outputs.push_back(y);
    if (mask_out) g.outputs.push_back(mask);
    return make_training_recipe(g, {.loss = parse_loss_spec("cross-entropy")});
  };
  auto ops = [](const Graph& g) {
    std::map<std::string, int> n;
    for (NodeId id : g.order()) ++n[g.node(id).op_type];
    return n;
  };
  auto zero = ops(model(0.0f, false).training.graph);
  EXPECT_EQ(zero["Dropout"] + zero["DropoutGrad"], 0);
  EXPECT_EQ(zero["Identity"], 1);
  auto quarter = ops(model(0.25f, false).training.graph);
  EXPECT_EQ(quarter["Dropout"], 1);
  EXPECT_EQ(quarter["DropoutGrad"], 1);
  EXPECT_EQ(ops(model(0.0f, true).training.graph)["Dropout"], 1);
}

// Clip with constant bounds (ReLU6's 0 and 6) differentiates as one ActivationGrad (activation "Clip"),
// torch.clamp's gradient: dY where lo <= x <= hi, the bounds included; bounds fed at run time keep the
// elementwise decomposition, with the same values. Both on the reference and on the default kernels.
TEST(TrainingGraph, ClipWithConstantBoundsIsOneActivationGrad) {
  for (bool constant_bounds : {true, false}) {
    SCOPED_TRACE(constant_bounds ? "constant bounds" : "bounds fed as inputs");
    Graph g;
    ValueId w = add_parameter(g, "w", {6}, 0.0f);
    const std::vector<float> at = {-1.0f, 0.0f, 0.5f, 6.0f, 7.0f, 3.0f};  // below, at lo, inside, at hi, above
    std::copy(at.begin(), at.end(), g.value(w).data->data<float>().begin());
    const auto bound = [&](const std::string& name, float value) {
      Tensor t(DType::Float32, {});
      t.data<float>()[0] = value;
      ValueId id = g.add_value({.name = name,
                                .dtype = DType::Float32,
                                .shape = Shape::of({}),
                                .role = constant_bounds ? ValueRole::Constant : ValueRole::Input,
                                .data = constant_bounds ? std::optional<Tensor>(t) : std::nullopt});
      (constant_bounds ? g.initializers : g.inputs).push_back(id);
      return id;
    };
    ValueId lo = bound("lo", 0.0f), hi = bound("hi", 6.0f);
    Tensor k(DType::Float32, {6});
    for (int i = 0; i < 6; ++i) k.data<float>()[i] = static_cast<float>(i + 1);
    ValueId weights = g.add_value(
        {.name = "k", .dtype = DType::Float32, .shape = Shape::of({6}), .role = ValueRole::Constant, .data = k});
    g.initializers.push_back(weights);
    ValueId loss = sum_all(g, add_node(g, "Mul", {add_node(g, "Clip", {w, lo, hi}), weights}));
    g.value(loss).name = "loss";
    TrainingGraph t = build_training_graph(g, {.loss = "loss"});
    int fused = 0, decomposed = 0;
    for (NodeId n : t.graph.order()) {
      const Node& node = t.graph.node(n);
      fused += node.op_type == "ActivationGrad" && node.attr_string("activation", "") == "Clip";
      decomposed += node.op_type == "Where" || node.op_type == "GreaterOrEqual" || node.op_type == "LessOrEqual";
    }
    EXPECT_EQ(fused, constant_bounds ? 1 : 0);
    EXPECT_EQ(decomposed, constant_bounds ? 0 : 3);
    std::map<std::string, Tensor> feed;
    if (!constant_bounds) {
      for (const auto& [name, value] : {std::pair{"lo", 0.0f}, std::pair{"hi", 6.0f}}) {
        Tensor b(DType::Float32, {});
        b.data<float>()[0] = value;
        feed[name] = b;
      }
    }
    for (const char* kernels : {"reference", ""}) {  // "": the default kernels (oneDNN, then the "cpu" ones)
      const auto out = InferenceSession(t.graph, kernels).run(feed);
      const std::vector<float> expected = {0.0f, 2.0f, 3.0f, 4.0f, 0.0f, 6.0f};
      const auto got = out.at("w_grad").data<float>();
      EXPECT_EQ(std::vector<float>(got.begin(), got.end()), expected) << kernels;
    }
  }
}

TEST(TrainingGraph, ReportsUnreachableParametersByName) {
  Graph g;
  ValueId a = add_parameter(g, "used", {2}, 1.0f);
  ValueId b = add_parameter(g, "unused_head", {2}, 1.0f);
  ValueId loss = sum_all(g, add_node(g, "Mul", {a, a}));
  g.value(loss).name = "loss";
  g.outputs = {loss, add_node(g, "Add", {b, b})};
  TrainingGraph t = build_training_graph(g, {.loss = "loss"});
  ASSERT_EQ(t.unreachable, std::vector<std::string>{"unused_head"});
  ASSERT_EQ(t.gradients.size(), 1u);
  EXPECT_EQ(t.graph.value(t.gradients[0].value).name, "used");
}

TEST(TrainingGraph, FrozenParametersAreNotTrained) {
  Graph g;
  ValueId a = add_parameter(g, "a", {2}, 1.0f);
  ValueId b = add_parameter(g, "b", {2}, 2.0f);
  g.value(b).frozen = true;
  ValueId loss = sum_all(g, add_node(g, "Mul", {a, b}));
  g.value(loss).name = "loss";
  TrainingGraph t = build_training_graph(g, {.loss = "loss"});
  ASSERT_EQ(t.gradients.size(), 1u);
  EXPECT_EQ(t.graph.value(t.gradients[0].value).name, "a");
  EXPECT_TRUE(t.unreachable.empty());
}

TEST(TrainingGraph, NeverDifferentiatesIntegers) {
  // Reshape's shape input is int64: it gets no gradient even when asked for everything.
  Graph g;
  ValueId w = add_parameter(g, "w", {2, 3}, 1.0f);
  ValueId shape = g.add_value({.name = "shape",
                               .dtype = DType::Int64,
                               .shape = Shape::of({1}),
                               .role = ValueRole::Buffer,
                               .data = Tensor::vector_int64({6}),
                               .known = std::vector<Dim>{6}});
  g.initializers.push_back(shape);
  ValueId loss = sum_all(g, add_node(g, "Reshape", {w, shape}));
  g.value(loss).name = "loss";
  TrainingGraph t = build_training_graph(g, {.loss = "loss"});
  ASSERT_EQ(t.gradients.size(), 1u);
  EXPECT_NE(error_of([&] { build_training_graph(g, {.loss = "loss", .wrt = {"shape"}}); }).find("only float tensors"),
            std::string::npos);
}

TEST(TrainingGraph, ClearErrors) {
  Graph g;
  ValueId w = add_parameter(g, "w", {2}, 1.0f);
  ValueId y = add_node(g, "Mul", {w, w});
  // A backward op in a forward graph has no gradient rule of its own: the error names the node.
  ValueId z = add_node(g, "ActivationGrad", {y, w}, {{"activation", std::string("Relu")}}, kTrainingDomain);
  ValueId loss = sum_all(g, z);
  g.value(loss).name = "loss";
  const std::string no_rule = error_of([&] { build_training_graph(g, {.loss = "loss"}); });
  EXPECT_NE(no_rule.find("no gradient rule for ai.onnxtrain::ActivationGrad"), std::string::npos) << no_rule;
  EXPECT_NE(no_rule.find("ActivationGrad_node_"), std::string::npos) << no_rule;
  EXPECT_NE(error_of([&] { build_training_graph(g, {.loss = "nope"}); }).find("no value named 'nope'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { build_training_graph(g, {.loss = "loss", .wrt = {"missing"}}); }).find("'missing'"),
            std::string::npos);
  Graph constant_loss;
  add_parameter(constant_loss, "w", {2}, 1.0f);
  ValueId c = constant_loss.add_value({.name = "c",
                                       .dtype = DType::Float32,
                                       .shape = Shape::of({1}),
                                       .role = ValueRole::Constant,
                                       .data = Tensor(DType::Float32, {1})});
  constant_loss.initializers.push_back(c);
  EXPECT_NE(error_of([&] { build_training_graph(constant_loss, {.loss = "c"}); }).find("does not depend"),
            std::string::npos);
}

// --- the exported fixtures: loss = sum(logits * R), gradients of every parameter ---

// Adds loss = sum(logits * R) to an imported fixture.
void add_weighted_sum_loss(Graph& g, const Tensor& r) {
  ValueId weights = g.add_value({.name = "loss_weights",
                                 .dtype = DType::Float32,
                                 .shape = Shape::of(r.sizes()),
                                 .role = ValueRole::Constant,
                                 .data = r});
  g.initializers.push_back(weights);
  ValueId loss = sum_all(g, add_node(g, "Mul", {g.outputs.at(0), weights}));
  g.value(loss).name = "loss";
}

// PyTorch's gradients (models/expected/make_gradients.py): same weights, input and loss, train() state.
class MatchesPyTorch : public ::testing::TestWithParam<std::string> {};

TEST_P(MatchesPyTorch, LossAndEveryParameterGradient) {
  const std::string name = GetParam();
  const std::string dir = kModels + "expected/gradients/";
  ImportedModel model = import_model(kModels + name + "_opset17.onnx");
  add_weighted_sum_loss(model.graph, read_npy(dir + "loss_weights.npy"));
  TrainingGraph t = build_training_graph(model.graph, {.loss = "loss"});
  const Tensor x = read_npy(dir + name + "/input.npy");
  for (const std::string implementation : {"", "reference"}) {
    auto out = InferenceSession(t.graph, implementation).run({{"input", x}});
    const double torch_loss = read_npy(dir + name + "/loss.npy").to_double().at(0);
    EXPECT_NEAR(out.at("loss").to_double().at(0), torch_loss, 1e-4 * std::max(1.0, std::abs(torch_loss)));
    for (const TrainingGraph::Gradient& gr : t.gradients) {
      const std::string param = t.graph.value(gr.value).name;
      const std::vector<double> expected = read_npy(dir + name + "/" + param + ".npy").to_double();
      const std::vector<double> got = out.at(t.graph.value(gr.gradient).name).to_double();
      ASSERT_EQ(got.size(), expected.size()) << param;
      double scale = 1e-3, diff = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        scale = std::max(scale, std::abs(expected[i]));
        diff = std::max(diff, std::abs(got[i] - expected[i]));
      }
      EXPECT_LT(diff, 1e-4 * scale) << name << " (" << (implementation.empty() ? "fast" : implementation)
                                    << " kernels): gradient of " << param << ", largest |torch| " << scale;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MatchesPyTorch, ::testing::Values("mlp", "cnn", "resnet"));

class FixtureTrainingGraph : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureTrainingGraph, FastKernelGradientsMatchReference) {
  ImportedModel model = import_model(kModels + GetParam() + ".onnx");
  Graph& g = model.graph;
  Tensor r(DType::Float32, {10});
  std::mt19937 rng(3);
  std::normal_distribution<float> gauss;
  for (float& v : r.data<float>()) v = gauss(rng);
  add_weighted_sum_loss(g, r);

  TrainingGraph t = build_training_graph(g, {.loss = "loss"});
  EXPECT_TRUE(t.unreachable.empty()) << t.unreachable.front();
  size_t parameters = 0;
  for (ValueId v : g.initializers) parameters += g.value(v).role == ValueRole::Parameter;
  EXPECT_EQ(t.gradients.size(), parameters);
  EXPECT_EQ(t.forward_node_count, g.node_count());

  const Value& input = g.value(g.inputs.at(0));
  std::vector<int64_t> sizes = {2};
  for (size_t d = 1; d < input.shape.dims.size(); ++d) sizes.push_back(input.shape.dims[d].value());
  Tensor x(input.dtype, sizes);
  if (input.dtype == DType::Int64) {
    for (size_t i = 0; i < x.data<int64_t>().size(); ++i) x.data<int64_t>()[i] = static_cast<int64_t>((i * 7) % 50);
  } else {
    for (float& v : x.data<float>()) v = gauss(rng);
  }
  auto expected = InferenceSession(t.graph, "reference").run({{input.name, x}});
  auto actual = InferenceSession(t.graph).run({{input.name, x}});
  for (const TrainingGraph::Gradient& gr : t.gradients) {
    const std::string name = t.graph.value(gr.gradient).name;
    const std::vector<double> a = actual.at(name).to_double(), e = expected.at(name).to_double();
    ASSERT_EQ(actual.at(name).sizes(), t.graph.value(gr.value).data->sizes()) << name;
    double scale = 1e-3, diff = 0;
    for (size_t i = 0; i < e.size(); ++i) {
      scale = std::max(scale, std::abs(e[i]));
      diff = std::max(diff, std::abs(a[i] - e[i]));
    }
    EXPECT_LT(diff, 1e-3 * scale) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTrainingGraph,
                         ::testing::Values("mlp_opset17", "cnn_opset17", "cnn_dynamo", "resnet_opset17",
                                           "transformer_opset17", "transformer_dynamo", "transformer_opset21"));

}  // namespace
