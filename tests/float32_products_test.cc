// graph/autodiff/float32_products: under bf16 the backward's half products write the float32 gradients
// autodiff would cast them to (a batched FusedMatMul, and a Gemm over a batch of rows through its
// Reshape), no Cast back reads a product any more, the option turns it off; the forward's Casts to half go
// before the Transposes of attention heads, which then move bfloat16; and training folded follows
// training with the Casts within bfloat16 rounding (it rounds less: the float32 sums are never halved).
#include "graph/autodiff/float32_products.h"

#include <gtest/gtest.h>

#include "graph/autodiff/training_recipe.h"
#include "tests/graph_builder.h"
#include "tests/same_training.h"

namespace onnxtrain {
namespace {

using testing_support::add_constant;
using testing_support::add_inferred_node;
using testing_support::add_input;
using testing_support::add_parameter;
using testing_support::uniform_tensor;

// X (4,6,8): q = X·Wq (a batch of rows times a matrix), scores = q·Xᵀ (a batched product), P = Softmax,
// o = P·X, logits = ReduceMean(o over its rows)·Wo: five classes.
Graph attention_model() {
  Graph g;
  const ValueId x = add_input(g, "x", {4, 6, 8});
  const ValueId q = add_inferred_node(g, "q_mm", "MatMul", {x, add_parameter(g, "wq", uniform_tensor({8, 8}, 1))}, "q");
  const ValueId xt = add_inferred_node(g, "x_t", "Transpose", {x}, "xt", {{"perm", std::vector<int64_t>{0, 2, 1}}});
  const ValueId s = add_inferred_node(g, "scores", "MatMul", {q, xt}, "s");
  const ValueId p = add_inferred_node(g, "softmax", "Softmax", {s}, "p", {{"axis", int64_t{-1}}});
  const ValueId o = add_inferred_node(g, "pv", "MatMul", {p, x}, "o");
  const ValueId m = add_inferred_node(g, "mean", "ReduceMean", {o}, "m",
                                      {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});  // (4,8)
  g.outputs.push_back(
      add_inferred_node(g, "out_mm", "MatMul", {m, add_parameter(g, "wo", uniform_tensor({8, 5}, 2))}, "logits"));
  return g;
}

// X (4,6,8) as nn.MultiheadAttention's heads: q, k and v each Transpose (1,0,2) to (6,4,8), Reshape to
// (6,4,2,4) and Transpose (0,2,1,3) to (6,2,4,4) (six sequences of two heads); q times k transposed,
// Softmax, times v, back through a Transpose to (4,6,8), the mean over its six rows and Wo: five classes.
// The heads' Transposes swap other axes than the products' last two, which FusedMatMul folds.
ValueId heads(Graph& g, ValueId x, const std::string& name) {
  const ValueId t =
      add_inferred_node(g, name + "_seq", "Transpose", {x}, name + "_t", {{"perm", std::vector<int64_t>{1, 0, 2}}});
  const ValueId r =
      add_inferred_node(g, name + "_split", "Reshape",
                        {t, add_constant(g, name + "_shape", Tensor::vector_int64({6, 4, 2, 4}))}, name + "_r");
  return add_inferred_node(g, name + "_heads", "Transpose", {r}, name, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
}

Graph heads_model() {
  Graph g;
  const ValueId x = add_input(g, "x", {4, 6, 8});
  const ValueId q = heads(g, x, "q"), k = heads(g, x, "k"), v = heads(g, x, "v");
  const ValueId kt = add_inferred_node(g, "k_t", "Transpose", {k}, "kt", {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  const ValueId s = add_inferred_node(g, "scores", "MatMul", {q, kt}, "s");
  const ValueId p = add_inferred_node(g, "softmax", "Softmax", {s}, "p", {{"axis", int64_t{-1}}});
  const ValueId o = add_inferred_node(g, "pv", "MatMul", {p, v}, "o");  // (6,2,4,4)
  const ValueId back =
      add_inferred_node(g, "merge", "Transpose", {o}, "back", {{"perm", std::vector<int64_t>{2, 0, 1, 3}}});
  const ValueId merged =
      add_inferred_node(g, "merged", "Reshape", {back, add_constant(g, "flat", Tensor::vector_int64({4, 6, 8}))}, "mg");
  const ValueId m = add_inferred_node(g, "mean", "ReduceMean", {merged}, "m",
                                      {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});  // (4,8)
  g.outputs.push_back(
      add_inferred_node(g, "out_mm", "MatMul", {m, add_parameter(g, "wo", uniform_tensor({8, 5}, 2))}, "logits"));
  return g;
}

bool is_product(const Node& n) { return n.op_type == "FusedMatMul" || n.is_onnx_op("Gemm"); }

// The node that writes what `n` reads first, through Reshapes and Transposes.
NodeId through_data_movement(const Graph& g, const Node& n) {
  NodeId from = g.value(n.inputs[0]).producer;
  while (from.valid() && (g.node(from).is_onnx_op("Reshape") || g.node(from).is_onnx_op("Transpose")))
    from = g.value(g.node(from).inputs[0]).producer;
  return from;
}

// Backward Casts to float32 that read a product's output, directly or through Reshapes and Transposes.
int casts_back_of_products(const TrainingGraph& t) {
  const Graph& g = t.graph;
  int found = 0;
  for (size_t i = t.forward_node_count; i < g.order().size(); ++i) {
    const Node& n = g.node(g.order()[i]);
    if (!n.is_onnx_op("Cast") || n.attr_int("to", 0) != 1) continue;
    const NodeId from = through_data_movement(g, n);
    found += from.valid() && is_product(g.node(from));
  }
  return found;
}

// Forward Transposes of float32 values, and of half ones.
std::pair<int, int> forward_transposes(const TrainingGraph& t) {
  std::pair<int, int> n{0, 0};
  for (size_t i = 0; i < t.forward_node_count; ++i) {
    const Node& node = t.graph.node(t.graph.order()[i]);
    if (!node.is_onnx_op("Transpose")) continue;
    (t.graph.value(node.outputs[0]).dtype == DType::Float32 ? n.first : n.second)++;
  }
  return n;
}

TEST(Float32Products, UnderBf16TheBackwardProductsWriteFloat32) {
  TrainingRecipeOptions o{.loss = parse_loss_spec("cross-entropy"), .precision = Precision::bf16};
  const TrainingRecipe folded = make_training_recipe(attention_model(), o);
  o.fold_casts_into_products = false;
  const TrainingRecipe kept = make_training_recipe(attention_model(), o);

  const int before = casts_back_of_products(kept.training);
  EXPECT_GE(before, 5);  // dq, dX through scores, pv (twice) and q's rows, dWq
  EXPECT_EQ(kept.casts_into_products, 0);
  EXPECT_EQ(folded.casts_into_products, before);
  EXPECT_EQ(casts_back_of_products(folded.training), 0);
  EXPECT_EQ(folded.training.graph.node_count() + static_cast<size_t>(before), kept.training.graph.node_count());
  EXPECT_EQ(folded.training.forward_node_count, kept.training.forward_node_count);

  // The gradients are the graph outputs they were, float32, now written by half products.
  const Graph& g = folded.training.graph;
  int float32_products = 0;
  for (const TrainingGraph::Gradient& grad : folded.training.gradients) {
    const Value& v = g.value(grad.gradient);
    EXPECT_EQ(v.dtype, DType::Float32) << v.name;
    NodeId from = v.producer;
    ASSERT_TRUE(from.valid()) << v.name;
    if (g.node(from).is_onnx_op("Reshape")) from = g.value(g.node(from).inputs[0]).producer;
    const Node& product = g.node(from);
    if (product.op_type != "FusedMatMul" || product.attr_int("float32_output", 0) != 1) continue;
    ++float32_products;
    for (size_t i = 0; i < 2; ++i) EXPECT_EQ(g.value(product.inputs[i]).dtype, DType::BFloat16) << product.name;
  }
  EXPECT_EQ(float32_products, 2);  // dWq (a Gemm before: now a FusedMatMul) and dWo

  // Float32 training has no Casts to fold.
  o.precision = Precision::fp32;
  o.fold_casts_into_products = true;
  EXPECT_EQ(make_training_recipe(attention_model(), o).casts_into_products, 0);
}

// The Casts to half go before the Transposes that lead to the half products: the heads' Transposes move
// bfloat16, the Casts back are folded through their gradients, and float32 training moves none.
TEST(Float32Products, UnderBf16TheCastsToHalfGoBeforeTheTransposes) {
  TrainingRecipeOptions o{.loss = parse_loss_spec("cross-entropy"), .precision = Precision::bf16};
  const TrainingRecipe moved = make_training_recipe(heads_model(), o);
  o.fold_casts_into_products = false;
  const TrainingRecipe kept = make_training_recipe(heads_model(), o);

  EXPECT_EQ(kept.casts_before_transposes, 0);
  EXPECT_EQ(forward_transposes(kept.training), std::make_pair(7, 0));  // k_t is folded into the scores
  // Each of q, k and v: its Cast moves before both Transposes (and the Reshape between them), twice;
  // merge's output reaches no product.
  EXPECT_EQ(moved.casts_before_transposes, 6);
  EXPECT_EQ(forward_transposes(moved.training), std::make_pair(1, 6));
  EXPECT_EQ(moved.training.forward_node_count, kept.training.forward_node_count);
  EXPECT_EQ(casts_back_of_products(moved.training), 0);
  EXPECT_GT(moved.casts_into_products, 0);
  // The Casts read the model's input X itself now.
  const Graph& g = moved.training.graph;
  int casts_of_x = 0;
  for (NodeId id : g.order()) casts_of_x += g.node(id).is_onnx_op("Cast") && g.value(g.node(id).inputs[0]).name == "x";
  EXPECT_EQ(casts_of_x, 3);

  o.precision = Precision::fp32;
  o.fold_casts_into_products = true;
  EXPECT_EQ(make_training_recipe(heads_model(), o).casts_before_transposes, 0);
}

TEST(Float32Products, TrainingFoldedFollowsTrainingWithTheCasts) {
  TrainerOptions folded = testing_support::momentum_sgd_options();
  folded.precision = Precision::bf16;
  TrainerOptions kept = folded;
  kept.fold_casts_into_products = false;
  for (Graph (*model)() : {&attention_model, &heads_model}) {
    testing_support::expect_close_training(model(), folded, kept, {4, 6, 8}, 5, 6, 2e-2);
  }
}

}  // namespace
}  // namespace onnxtrain
