// graph/autodiff/pool_before_relu: which Relu -> MaxPool pairs the training graph swaps (not one whose Relu
// output another node reads, not a MaxPool whose Indices are read, not the evaluation graph), and that
// training swapped gives what training in the model's order gives, bit for bit: the forward values, the
// gradients (a window whose maximum is at most 0 passes none either way) and so the weights.
#include "graph/autodiff/pool_before_relu.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "graph/autodiff/training_recipe.h"
#include "tests/graph_builder.h"
#include "tests/same_training.h"

namespace onnxtrain {
namespace {

using testing_support::add_inferred_node;
using testing_support::add_input;
using testing_support::add_parameter;
using testing_support::conv2d_attributes;
using testing_support::uniform_tensor;

const Attributes kPool2x2{{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}};

// X (4,2,8,8) → Conv → Relu → MaxPool 2x2 (swappable) → Conv → Relu, read by a MaxPool and an Add (not
// swappable) → GlobalAveragePool → Flatten: five logits. The weights are centred on 0, so many windows
// hold only negative values.
Graph conv_relu_pool_model() {
  Graph g;
  const ValueId x = add_input(g, "x", {4, 2, 8, 8});
  const ValueId h1 = add_inferred_node(g, "conv1", "Conv", {x, add_parameter(g, "w1", uniform_tensor({6, 2, 3, 3}, 1))},
                                       "h1", conv2d_attributes(1, 1));
  const ValueId r1 = add_inferred_node(g, "relu1", "Relu", {h1}, "r1");
  const ValueId p1 = add_inferred_node(g, "pool1", "MaxPool", {r1}, "p1", kPool2x2);
  const ValueId h2 = add_inferred_node(
      g, "conv2", "Conv", {p1, add_parameter(g, "w2", uniform_tensor({5, 6, 3, 3}, 2))}, "h2", conv2d_attributes(1, 1));
  const ValueId r2 = add_inferred_node(g, "relu2", "Relu", {h2}, "r2");
  const ValueId p2 = add_inferred_node(g, "pool2", "MaxPool", {r2}, "p2", kPool2x2);
  const ValueId q2 = add_inferred_node(g, "pool2b", "MaxPool", {r2}, "q2", kPool2x2);
  const ValueId s = add_inferred_node(g, "add", "Add", {p2, q2}, "s");
  const ValueId a = add_inferred_node(g, "gap", "GlobalAveragePool", {s}, "a");
  g.outputs.push_back(add_inferred_node(g, "flatten", "Flatten", {a}, "logits", {{"axis", int64_t{1}}}));
  return g;
}

TEST(PoolBeforeRelu, TheTrainingGraphPoolsFirstWhereOnlyAMaxPoolReadsTheRelu) {
  const Graph model = conv_relu_pool_model();
  const TrainingRecipe r = make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy")});
  EXPECT_EQ(r.pools_before_relus, 1);
  const Graph& g = r.training.graph;
  const Node& relu1 = g.node(g.value(*g.find_value("p1")).producer);  // p1 is now the Relu's output
  EXPECT_EQ(relu1.name, "relu1");
  const Node& pool1 = g.node(g.value(relu1.inputs[0]).producer);
  EXPECT_EQ(pool1.name, "pool1");
  EXPECT_EQ(g.value(pool1.inputs[0]).name, "h1");
  EXPECT_EQ(g.node(g.value(*g.find_value("r2")).producer).name, "relu2");  // read twice: stays
  // The evaluation graph keeps the model's order.
  EXPECT_EQ(r.evaluation.node(r.evaluation.value(*r.evaluation.find_value("p1")).producer).name, "pool1");
  const TrainingRecipe off =
      make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy"), .pool_before_relu = false});
  EXPECT_EQ(off.pools_before_relus, 0);

  Graph with_indices = model;  // a MaxPool whose Indices output exists is left as it is
  for (NodeId id : with_indices.order()) {
    Node& n = with_indices.node(id);
    if (n.name != "pool1") continue;
    const ValueId indices = with_indices.add_value({.name = "indices", .dtype = DType::Int64});
    with_indices.value(indices).producer = id;
    n.outputs.push_back(indices);
  }
  EXPECT_EQ(pool_before_relu(with_indices), 0);
}

TEST(PoolBeforeRelu, TrainingPooledFirstEqualsTrainingInTheModelsOrderBitForBit) {
  const TrainerOptions swapped = testing_support::momentum_sgd_options();
  TrainerOptions in_order = swapped;
  in_order.pool_before_relu = false;
  testing_support::expect_same_training(conv_relu_pool_model(), swapped, in_order, {4, 2, 8, 8}, 5);
}

}  // namespace
}  // namespace onnxtrain
