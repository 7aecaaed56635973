// graph/autodiff/live_conv_taps: which convolutions train only their live taps, that training them so
// gives what training every tap gives (the same losses, the same whole weights once rebuilt, the dead
// taps untouched), and that weight decay keeps every tap.
#include "graph/autodiff/live_conv_taps.h"

#include <gtest/gtest.h>

#include <cmath>

#include "executor/trainer.h"
#include "graph/autodiff/training_recipe.h"
#include "graph/error.h"
#include "tests/graph_builder.h"

namespace onnxtrain {
namespace {

using testing_support::add_inferred_node;
using testing_support::add_input;
using testing_support::add_parameter;
using testing_support::conv2d_attributes;
using testing_support::uniform_tensor;
using Ints = std::vector<int64_t>;

// X (4,3,2,2) → Conv 3x3 stride 2 pads 1 (one output pixel that reads taps [1,3)x[1,3)) → Relu →
// Conv 3x3 pads 1 over the 1x1 plane (the centre tap) with a bias → Flatten: five logits.
Graph two_single_pixel_convs() {
  Graph g;
  const ValueId x = add_input(g, "x", {4, 3, 2, 2});
  const ValueId w1 = add_parameter(g, "w1", uniform_tensor({8, 3, 3, 3}, 1));
  const ValueId w2 = add_parameter(g, "w2", uniform_tensor({5, 8, 3, 3}, 2));
  const ValueId b2 = add_parameter(g, "b2", uniform_tensor({5}, 3));
  const ValueId h = add_inferred_node(g, "conv1", "Conv", {x, w1}, "h", conv2d_attributes(2, 1));
  const ValueId r = add_inferred_node(g, "relu", "Relu", {h}, "r");
  const ValueId y = add_inferred_node(g, "conv2", "Conv", {r, w2, b2}, "y", conv2d_attributes(1, 1));
  g.outputs.push_back(add_inferred_node(g, "flatten", "Flatten", {y}, "logits", {{"axis", int64_t{1}}}));
  return g;
}

TEST(LiveConvTaps, FindsTheTapsThatLandOnTheInputOfSinglePixelConvolutions) {
  const std::vector<LiveConvTaps> taps = live_conv_taps(two_single_pixel_convs());
  ASSERT_EQ(taps.size(), 2u);
  EXPECT_EQ(taps[0].weight, "w1");
  EXPECT_EQ(taps[0].live, "w1.live_taps");
  EXPECT_EQ(taps[0].begin, (Ints{1, 1}));
  EXPECT_EQ(taps[0].end, (Ints{3, 3}));
  EXPECT_EQ(taps[1].weight, "w2");
  EXPECT_EQ(taps[1].begin, (Ints{1, 1}));
  EXPECT_EQ(taps[1].end, (Ints{2, 2}));
}

TEST(LiveConvTaps, LeavesConvolutionsThatReadEveryTapOrNotEveryInput) {
  Graph g;
  const ValueId x = add_input(g, "x", {2, 4, 2, 2});
  // Four output pixels; a 1x1 kernel of stride 2 (reads one of the four inputs); a 2x2 kernel without
  // pads (every tap live); groups; a weight read twice.
  add_inferred_node(g, "wide", "Conv", {x, add_parameter(g, "a", uniform_tensor({4, 4, 3, 3}, 1))}, "ya",
                    conv2d_attributes(1, 1));
  add_inferred_node(g, "strided", "Conv", {x, add_parameter(g, "b", uniform_tensor({4, 4, 1, 1}, 2))}, "yb",
                    conv2d_attributes(2, 0));
  add_inferred_node(g, "full", "Conv", {x, add_parameter(g, "c", uniform_tensor({4, 4, 2, 2}, 3))}, "yc",
                    conv2d_attributes(1, 0));
  add_inferred_node(g, "grouped", "Conv", {x, add_parameter(g, "d", uniform_tensor({4, 2, 3, 3}, 4))}, "yd",
                    conv2d_attributes(2, 1, 2));
  const ValueId shared = add_parameter(g, "e", uniform_tensor({4, 4, 3, 3}, 5));
  add_inferred_node(g, "shared1", "Conv", {x, shared}, "ye1", conv2d_attributes(2, 1));
  add_inferred_node(g, "shared2", "Conv", {x, shared}, "ye2", conv2d_attributes(2, 1));
  EXPECT_TRUE(live_conv_taps(g).empty());
}

// The recipe (what partition, simulate and bench price) rewrites by default and says what it rewrote.
TEST(LiveConvTaps, TheRecipeRewritesByDefault) {
  const Graph model = two_single_pixel_convs();
  const TrainingRecipe live = make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy")});
  ASSERT_EQ(live.live_conv_taps.size(), 2u);
  EXPECT_EQ(live.live_conv_taps[1].live, "w2.live_taps");
  EXPECT_TRUE(live.training.graph.find_value("w2.live_taps"));
  const TrainingRecipe every =
      make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy"), .live_conv_taps_only = false});
  EXPECT_TRUE(every.live_conv_taps.empty());
  EXPECT_FALSE(every.training.graph.find_value("w2.live_taps"));
}

TrainerOptions momentum_sgd(bool live_taps, double weight_decay = 0) {
  TrainerOptions o;
  o.loss = parse_loss_spec("cross-entropy");
  o.schedule.base_lr = 0.1;
  o.optimizer.momentum = 0.9;
  o.optimizer.weight_decay = weight_decay;
  o.live_conv_taps = live_taps;
  return o;
}

TEST(LiveConvTaps, TrainingTheLiveTapsMatchesTrainingEveryTap) {
  const Graph model = two_single_pixel_convs();
  // Each trains its own copy (a Graph copy shares the initializers' buffers).
  Trainer live(copy_with_own_initializers(model), momentum_sgd(true));
  Trainer every(copy_with_own_initializers(model), momentum_sgd(false));
  std::map<std::string, Tensor> initial;  // copies: trained_initializers shares the trainer's buffers
  for (const auto& [name, t] : every.trained_initializers()) initial[name] = t.clone();
  EXPECT_TRUE(live.trained_initializers().count("w1.live_taps"));
  EXPECT_FALSE(live.trained_initializers().count("w1"));
  EXPECT_EQ(live.trained_initializers().at("w2.live_taps").sizes(), (Ints{5, 8}));
  Tensor labels(DType::Int64, {4});
  for (int64_t i = 0; i < 4; ++i) labels.data<int64_t>()[static_cast<size_t>(i)] = i % 5;
  for (int step = 0; step < 4; ++step) {
    const Tensor x = uniform_tensor({4, 3, 2, 2}, 10 + static_cast<uint32_t>(step));
    const float a = live.train_step(x, labels);
    const float b = every.train_step(x, labels);
    EXPECT_NEAR(a, b, 1e-5 * std::abs(b)) << "step " << step;
  }
  const std::map<std::string, Tensor> rebuilt = with_full_conv_weights(model, live.trained_initializers());
  const std::map<std::string, Tensor> dense = every.trained_initializers();
  ASSERT_EQ(rebuilt.size(), dense.size());
  for (const auto& [name, t] : dense) {
    ASSERT_TRUE(rebuilt.count(name)) << name;
    ASSERT_EQ(rebuilt.at(name).sizes(), t.sizes()) << name;
    const std::span<const float> got = rebuilt.at(name).data<float>(), want = t.data<float>();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << name << "[" << i << "]";
  }
  // w2's taps other than the centre met only padding: bit for bit where they started, in both.
  const std::span<const float> w2 = rebuilt.at("w2").data<float>(), w2_initial = initial.at("w2").data<float>();
  int changed_centre = 0;
  for (size_t i = 0; i < w2.size(); ++i) {
    if (i % 9 == 4)
      changed_centre += w2[i] != w2_initial[i];
    else
      EXPECT_EQ(w2[i], w2_initial[i]) << i;
  }
  EXPECT_EQ(changed_centre, 5 * 8);
}

// A checkpoint of an earlier build holds the whole weights and their momentum: converted, a trainer of
// the live taps continues from it as the trainer of every tap does.
TEST(LiveConvTaps, StateOfEveryTapContinuesAsLiveTaps) {
  const Graph model = two_single_pixel_convs();
  Trainer every(copy_with_own_initializers(model), momentum_sgd(false));
  Tensor labels(DType::Int64, {4});
  for (int64_t i = 0; i < 4; ++i) labels.data<int64_t>()[static_cast<size_t>(i)] = (i * 3) % 5;
  for (int step = 0; step < 2; ++step) every.train_step(uniform_tensor({4, 3, 2, 2}, 20 + step), labels);
  std::map<std::string, Tensor> tensors, state;
  for (const auto& [name, t] : every.trained_initializers()) tensors[name] = t.clone();
  for (const auto& [name, t] : every.optimizer().state_tensors()) state[name] = t.clone();
  ASSERT_TRUE(state.count("w2/momentum_buffer"));
  EXPECT_EQ(keep_live_conv_taps(model, tensors, state), 2);
  EXPECT_FALSE(tensors.count("w2"));
  EXPECT_EQ(tensors.at("w2.live_taps").numel(), 5 * 8);
  EXPECT_EQ(state.at("w2.live_taps/momentum_buffer").numel(), 5 * 8);
  EXPECT_EQ(keep_live_conv_taps(model, tensors, state), 0) << "converted twice";

  Trainer live(copy_with_own_initializers(model), momentum_sgd(true));
  live.restore(tensors, state);
  for (int step = 2; step < 4; ++step) {
    const Tensor x = uniform_tensor({4, 3, 2, 2}, 20 + static_cast<uint32_t>(step));
    const float b = every.train_step(x, labels);
    EXPECT_NEAR(live.train_step(x, labels), b, 1e-5 * std::abs(b)) << "step " << step;
  }
  const std::map<std::string, Tensor> rebuilt = with_full_conv_weights(model, live.trained_initializers());
  const std::span<const float> got = rebuilt.at("w2").data<float>(),
                               want = every.trained_initializers().at("w2").data<float>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST(LiveConvTaps, WeightDecayTrainsEveryTap) {
  Trainer trainer(two_single_pixel_convs(), momentum_sgd(true, 1e-4));
  EXPECT_TRUE(trainer.trained_initializers().count("w1"));
  EXPECT_FALSE(trainer.trained_initializers().count("w1.live_taps"));
}

TEST(LiveConvTaps, RebuildingRefusesTapsOfAnotherSize) {
  const Graph model = two_single_pixel_convs();
  std::map<std::string, Tensor> trained{{"w2.live_taps", Tensor(DType::Float32, {5, 9})}};
  EXPECT_THROW(with_full_conv_weights(model, trained), Error);
  trained = {{"b2", Tensor(DType::Float32, {5})}};  // nothing to rebuild: passes unchanged
  EXPECT_EQ(with_full_conv_weights(model, trained).size(), 1u);
}

}  // namespace
}  // namespace onnxtrain
