// graph/autodiff/tap_major_conv_weights: which convolutions train on tap-major weights, that the
// permutation round-trips, that training so gives what training the model's layout gives (the same losses
// and weights, bit for bit: the same products on the same values), with weight decay too, that under bf16
// autocast they stay float32, and that a checkpoint's weights and optimizer state convert either way and
// continue the same run.
#include "graph/autodiff/tap_major_conv_weights.h"

#include <gtest/gtest.h>

#include <cmath>

#include "executor/trainer.h"
#include "graph/autodiff/live_conv_taps.h"
#include "graph/autodiff/training_recipe.h"
#include "tests/graph_builder.h"

namespace onnxtrain {
namespace {

using testing_support::add_inferred_node;
using testing_support::add_input;
using testing_support::add_parameter;
using testing_support::conv2d_attributes;
using testing_support::uniform_tensor;
using Ints = std::vector<int64_t>;

// X (4,3,4,4) → Conv 3x3 stride 2 pads 1 (2x2 output) → Relu → Conv 3x3 pads 1 with a bias (2x2) →
// Conv 2x2 without pads (one pixel: not this case) → Flatten: six logits.
Graph two_small_plane_convs() {
  Graph g;
  const ValueId x = add_input(g, "x", {4, 3, 4, 4});
  const ValueId h = add_inferred_node(g, "conv1", "Conv", {x, add_parameter(g, "w1", uniform_tensor({8, 3, 3, 3}, 1))},
                                      "h", conv2d_attributes(2, 1));
  const ValueId r = add_inferred_node(g, "relu", "Relu", {h}, "r");
  const ValueId y = add_inferred_node(
      g, "conv2", "Conv",
      {r, add_parameter(g, "w2", uniform_tensor({5, 8, 3, 3}, 2)), add_parameter(g, "b2", uniform_tensor({5}, 3))}, "y",
      conv2d_attributes(1, 1));
  const ValueId z = add_inferred_node(g, "conv3", "Conv", {y, add_parameter(g, "w3", uniform_tensor({6, 5, 2, 2}, 4))},
                                      "z", conv2d_attributes(1, 0));
  g.outputs.push_back(add_inferred_node(g, "flatten", "Flatten", {z}, "logits", {{"axis", int64_t{1}}}));
  return g;
}

TEST(TapMajorConvWeights, TheTapProductTakesSmallPlanesWhereAQuarterOfThePairsIsPadding) {
  // A 3x3 kernel with stride 1 and pads 1 over n x n, or with stride 2 over 2n x 2n.
  const auto square = [](int64_t n, int64_t stride, int64_t pad) {
    const ConvAxis a{.input = n * stride, .output = n, .kernel = 3, .stride = stride, .pad_begin = pad};
    return std::vector<ConvAxis>{a, a};
  };
  EXPECT_TRUE(tap_product_takes(square(2, 1, 1)));   // 16 of 36 pairs inside
  EXPECT_TRUE(tap_product_takes(square(2, 2, 1)));   // 25 of 36: any plane of up to 4 positions
  EXPECT_TRUE(tap_product_takes(square(3, 1, 1)));   // 49 of 81
  EXPECT_TRUE(tap_product_takes(square(4, 1, 1)));   // 100 of 144
  EXPECT_FALSE(tap_product_takes(square(4, 2, 1)));  // 121 of 144
  EXPECT_FALSE(tap_product_takes(square(5, 1, 1)));  // 25 positions
  EXPECT_FALSE(tap_product_takes(square(1, 1, 1)));  // one position: single_pixel_conv.h
  EXPECT_FALSE(tap_product_takes({{.input = 6, .output = 4, .kernel = 3}, {.input = 6, .output = 4, .kernel = 3}}));
  EXPECT_FALSE(tap_product_takes({{.input = 2, .output = 2}, {.input = 2, .output = 2}}));  // a 1x1 kernel
  // A dilation of 2 with pads 2 over 4 positions, a 1x1 kernel over the other 4: 32 of 48 pairs inside.
  const ConvAxis dilated{.input = 4, .output = 4, .kernel = 3, .pad_begin = 2, .dilation = 2};
  EXPECT_TRUE(tap_product_takes({dilated, {.input = 4, .output = 4, .kernel = 1}}));
}

TEST(TapMajorConvWeights, FindsConvolutionsThatTheTapProductTakes) {
  const std::vector<TapMajorConvWeight> found = tap_major_conv_weights(two_small_plane_convs());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].weight, "w1");
  EXPECT_EQ(found[0].tap_major, "w1.tap_major");
  EXPECT_EQ(found[1].weight, "w2");

  Graph g;
  const ValueId x = add_input(g, "x", {2, 4, 3, 3});
  // 25 output positions; a 1x1 kernel; groups; a weight read twice; and one that qualifies (1x2).
  add_inferred_node(g, "wide", "Conv",
                    {add_input(g, "x5", {2, 4, 5, 5}), add_parameter(g, "a", uniform_tensor({4, 4, 3, 3}, 1))}, "ya",
                    conv2d_attributes(1, 1));
  add_inferred_node(g, "pointwise", "Conv", {x, add_parameter(g, "b", uniform_tensor({4, 4, 1, 1}, 2))}, "yb",
                    conv2d_attributes(2, 0));
  add_inferred_node(g, "grouped", "Conv", {x, add_parameter(g, "c", uniform_tensor({4, 2, 3, 3}, 3))}, "yc",
                    conv2d_attributes(2, 1, 2));
  const ValueId shared = add_parameter(g, "d", uniform_tensor({4, 4, 3, 3}, 4));
  add_inferred_node(g, "shared1", "Conv", {x, shared}, "yd1", conv2d_attributes(2, 1));
  add_inferred_node(g, "shared2", "Conv", {x, shared}, "yd2", conv2d_attributes(2, 1));
  add_inferred_node(g, "row", "Conv", {x, add_parameter(g, "e", uniform_tensor({4, 4, 3, 2}, 5))}, "ye",
                    Attributes{{"pads", Ints{0, 0, 0, 0}}});
  const std::vector<TapMajorConvWeight> only = tap_major_conv_weights(g);
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only[0].weight, "e");
}

TEST(TapMajorConvWeights, ThePermutationPutsTapsFirstAndRoundTrips) {
  const Tensor w = uniform_tensor({5, 3, 2, 3}, 9);  // M 5, C 3, taps 2x3
  const Tensor wt = to_tap_major(w);
  EXPECT_EQ(wt.sizes(), (Ints{2, 3, 3, 5}));
  const std::span<const float> a = w.data<float>(), b = wt.data<float>();
  for (int64_t m = 0; m < 5; ++m)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t t = 0; t < 6; ++t)
        ASSERT_EQ(b[static_cast<size_t>((t * 3 + c) * 5 + m)], a[static_cast<size_t>((m * 3 + c) * 6 + t)]);
  const Tensor back = from_tap_major(wt);
  EXPECT_EQ(back.sizes(), w.sizes());
  const std::span<const float> c = back.data<float>();
  EXPECT_TRUE(std::equal(a.begin(), a.end(), c.begin()));
}

TEST(TapMajorConvWeights, TheRecipeRewritesInFloat32AndSaysWhat) {
  const Graph model = two_small_plane_convs();
  const TrainingRecipe r = make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy")});
  ASSERT_EQ(r.tap_major_conv_weights.size(), 2u);
  EXPECT_TRUE(r.training.graph.find_value("w2.tap_major"));
  const Graph& g = r.training.graph;
  EXPECT_TRUE(g.consumers(*g.find_value("w2")).empty());   // W left the graph
  EXPECT_FALSE(g.consumers(*g.find_value("w3")).empty());  // one output pixel: not this case
  const TrainingRecipe off =
      make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy"), .tap_major_conv_weights = false});
  EXPECT_TRUE(off.tap_major_conv_weights.empty());
  // Under bf16 autocast too, where they stay float32 (oneDNN's bfloat16 kernels over such planes are the
  // slow ones); the one-pixel Conv computes in bfloat16 as before.
  const TrainingRecipe bf16 =
      make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy"), .precision = Precision::bf16});
  ASSERT_EQ(bf16.tap_major_conv_weights.size(), 2u);
  const Graph& h = bf16.training.graph;
  int tap_major = 0, convs = 0;
  for (NodeId id : h.order()) {
    const Node& n = h.node(id);
    if (n.op_type == "TapMajorConv") {
      ++tap_major;
      for (ValueId in : n.inputs) {
        if (!in.valid()) continue;
        EXPECT_EQ(h.value(in).dtype, DType::Float32) << n.name;
      }
    } else if (n.is_onnx_op("Conv")) {
      ++convs;
      EXPECT_EQ(h.value(n.inputs[0]).dtype, DType::BFloat16) << n.name;
    }
  }
  EXPECT_EQ(tap_major, 2);
  EXPECT_EQ(convs, 1);
  // A GPU's graph (set_cpu_rewrites(false): Trainer on a GPU, partition and simulate pricing one) keeps them
  // Conv, which bf16 casts as a GPU trains them, so a plan made for a GPU names the same nodes.
  TrainingRecipeOptions gpu{.loss = parse_loss_spec("cross-entropy"), .precision = Precision::bf16};
  gpu.set_cpu_rewrites(false);
  EXPECT_TRUE(make_training_recipe(model, gpu).tap_major_conv_weights.empty());
}

TrainerOptions momentum_sgd(bool tap_major, double weight_decay) {
  TrainerOptions o;
  o.loss = parse_loss_spec("cross-entropy");
  o.schedule.base_lr = 0.1;
  o.optimizer.momentum = 0.9;
  o.optimizer.weight_decay = weight_decay;
  o.tap_major_conv_weights = tap_major;
  return o;
}

Tensor labels() {
  Tensor y(DType::Int64, {4});
  for (int64_t i = 0; i < 4; ++i) y.data<int64_t>()[static_cast<size_t>(i)] = i % 6;
  return y;
}

void expect_same_weights(const std::map<std::string, Tensor>& got, const std::map<std::string, Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    ASSERT_EQ(got.at(name).sizes(), t.sizes()) << name;
    const std::span<const float> a = got.at(name).data<float>(), b = t.data<float>();
    for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(a[i], b[i]) << name << "[" << i << "]";
  }
}

TEST(TapMajorConvWeights, TrainingTapMajorEqualsTrainingTheModelsLayoutBitForBit) {
  for (const double weight_decay : {0.0, 0.01}) {
    SCOPED_TRACE("weight decay " + std::to_string(weight_decay));
    const Graph model = two_small_plane_convs();
    Trainer tap_major(copy_with_own_initializers(model), momentum_sgd(true, weight_decay));
    Trainer plain(copy_with_own_initializers(model), momentum_sgd(false, weight_decay));
    EXPECT_EQ(tap_major.trained_initializers().at("w1.tap_major").sizes(), (Ints{3, 3, 3, 8}));
    EXPECT_FALSE(tap_major.trained_initializers().count("w1"));
    for (int step = 0; step < 4; ++step) {
      const Tensor x = uniform_tensor({4, 3, 4, 4}, 10 + static_cast<uint32_t>(step));
      EXPECT_EQ(tap_major.train_step(x, labels()), plain.train_step(x, labels())) << "step " << step;
    }
    // What leaves training (the written model, export) is in the model's layout.
    expect_same_weights(with_full_conv_weights(model, tap_major.trained_initializers()), plain.trained_initializers());
  }
}

// Under --precision bf16 the tap-major convolutions train in float32 beside the bfloat16 one: the losses
// follow float32's within the rounding of that Conv's operands, and what leaves training has the model's
// layout.
TEST(TapMajorConvWeights, UnderBf16TheyTrainInFloat32) {
  const Graph model = two_small_plane_convs();
  TrainerOptions options = momentum_sgd(true, 0.0);
  options.precision = Precision::bf16;
  Trainer bf16(copy_with_own_initializers(model), options);
  Trainer fp32(copy_with_own_initializers(model), momentum_sgd(true, 0.0));
  EXPECT_EQ(bf16.trained_initializers().at("w1.tap_major").sizes(), (Ints{3, 3, 3, 8}));
  for (int step = 0; step < 4; ++step) {
    const Tensor x = uniform_tensor({4, 3, 4, 4}, 30 + static_cast<uint32_t>(step));
    const float want = fp32.train_step(x, labels());
    EXPECT_NEAR(bf16.train_step(x, labels()), want, 0.03 * std::abs(want)) << "step " << step;
  }
  const std::map<std::string, Tensor> written = with_full_conv_weights(model, bf16.trained_initializers());
  EXPECT_EQ(written.at("w1").sizes(), (Ints{8, 3, 3, 3}));
  EXPECT_FALSE(written.count("w1.tap_major"));
}

// A checkpoint of a tap-major run continues in a run of the model's layout (a GPU's), and the other way.
TEST(TapMajorConvWeights, ACheckpointConvertsEitherWayAndContinuesTheRun) {
  const Graph model = two_small_plane_convs();
  Trainer first(copy_with_own_initializers(model), momentum_sgd(true, 0.0));
  for (int step = 0; step < 2; ++step) first.train_step(uniform_tensor({4, 3, 4, 4}, 20 + step), labels());
  std::map<std::string, Tensor> tensors = first.trained_initializers();
  std::map<std::string, Tensor> state = first.optimizer().state_tensors();
  ASSERT_TRUE(state.count("w1.tap_major/momentum_buffer"));
  EXPECT_EQ(match_tap_major_conv_weights(model, true, tensors, state), 0);  // already tap-major
  EXPECT_EQ(match_tap_major_conv_weights(model, false, tensors, state), 2);
  EXPECT_TRUE(tensors.count("w1"));
  EXPECT_FALSE(tensors.count("w1.tap_major"));
  Trainer plain(copy_with_own_initializers(model), momentum_sgd(false, 0.0));
  plain.restore(tensors, state);
  EXPECT_EQ(match_tap_major_conv_weights(model, true, tensors, state), 2);
  Trainer again(copy_with_own_initializers(model), momentum_sgd(true, 0.0));
  again.restore(tensors, state);
  for (int step = 2; step < 4; ++step) {
    const Tensor x = uniform_tensor({4, 3, 4, 4}, 20 + static_cast<uint32_t>(step));
    const float want = first.train_step(x, labels());
    EXPECT_EQ(plain.train_step(x, labels()), want) << "step " << step;
    EXPECT_EQ(again.train_step(x, labels()), want) << "step " << step;
  }
  expect_same_weights(plain.trained_initializers(), with_full_conv_weights(model, first.trained_initializers()));
}

}  // namespace
}  // namespace onnxtrain
