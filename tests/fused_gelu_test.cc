// graph/autodiff/fused_gelu: GELU's formula as exporters spell it (TorchScript's and dynamo's nn.GELU,
// Hugging Face's GELU and GPT-2's NewGELU, with the factors grouped each way) becomes one Gelu; what is
// not exactly the formula (another constant, a trainable scalar, an intermediate read elsewhere, a
// missing factor) stays; the training recipe fuses the training graph only; and training fused follows
// training as the model has it (oneDNN's Gelu is within float32 rounding of the formula).
#include "graph/autodiff/fused_gelu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numbers>

#include "graph/autodiff/training_recipe.h"
#include "tests/graph_builder.h"
#include "tests/same_training.h"

namespace onnxtrain {
namespace {

using testing_support::add_inferred_node;
using testing_support::add_input;
using testing_support::add_parameter;
using testing_support::add_scalar;
using testing_support::uniform_tensor;

const float kSqrt2 = std::numbers::sqrt2_v<float>;
const float kTanhScale = std::sqrt(2 / std::numbers::pi_v<float>);

enum class Spelling {
  TorchScriptErf,  // (x · (1 + erf(x / √2))) · 0.5
  HalfFirstErf,    // (x · 0.5) · (1 + erf(x / √2)): Hugging Face's GELU
  DynamoErf,       // x · (0.5 · (erf(x / √2) + 1))
  ReciprocalErf,   // x · (1/√2) inside
  PowTanh,         // (x · 0.5) · (1 + tanh(√(2/π) · (x + Pow(x, 3) · 0.044715))): GPT-2's NewGELU
  ProductTanh,     // 0.5 · ((1 + tanh((0.044715 · (x · (x · x)) + x) · √(2/π))) · x)
};

// GELU of `x` written out as `spelling`; node and value names start with `p`.
ValueId add_gelu_formula(Graph& g, ValueId x, Spelling spelling, const std::string& p) {
  auto node = [&](const std::string& op, std::vector<ValueId> in) {
    return add_inferred_node(g, p + op + std::to_string(g.node_count()), op, std::move(in),
                             p + op + "_out" + std::to_string(g.node_count()));
  };
  auto constant = [&](float value) { return add_scalar(g, p + "c" + std::to_string(g.value_count()), value); };
  switch (spelling) {
    case Spelling::TorchScriptErf: {
      const ValueId a = node("Add", {node("Erf", {node("Div", {x, constant(kSqrt2)})}), constant(1)});
      return node("Mul", {node("Mul", {x, a}), constant(0.5f)});
    }
    case Spelling::HalfFirstErf: {
      const ValueId half = node("Mul", {x, constant(0.5f)});
      const ValueId a = node("Add", {constant(1), node("Erf", {node("Div", {x, constant(kSqrt2)})})});
      return node("Mul", {half, a});
    }
    case Spelling::DynamoErf: {
      const ValueId a = node("Add", {node("Erf", {node("Div", {x, constant(kSqrt2)})}), constant(1)});
      return node("Mul", {x, node("Mul", {constant(0.5f), a})});
    }
    case Spelling::ReciprocalErf: {
      const ValueId a = node("Add", {node("Erf", {node("Mul", {constant(1 / kSqrt2), x})}), constant(1)});
      return node("Mul", {node("Mul", {x, a}), constant(0.5f)});
    }
    case Spelling::PowTanh: {
      const ValueId half = node("Mul", {x, constant(0.5f)});
      const ValueId cubic = node("Mul", {node("Pow", {x, constant(3)}), constant(0.044715f)});
      const ValueId u = node("Mul", {node("Add", {x, cubic}), constant(kTanhScale)});
      return node("Mul", {half, node("Add", {node("Tanh", {u}), constant(1)})});
    }
    case Spelling::ProductTanh: {
      const ValueId cube = node("Mul", {x, node("Mul", {x, x})});
      const ValueId sum = node("Add", {node("Mul", {constant(0.044715f), cube}), x});
      const ValueId a = node("Add", {constant(1), node("Tanh", {node("Mul", {sum, constant(kTanhScale)})})});
      return node("Mul", {constant(0.5f), node("Mul", {a, x})});
    }
  }
  return {};
}

TEST(FusedGelu, EverySpellingBecomesOneGelu) {
  const std::vector<std::pair<Spelling, std::string>> cases = {
      {Spelling::TorchScriptErf, "none"}, {Spelling::HalfFirstErf, "none"}, {Spelling::DynamoErf, "none"},
      {Spelling::ReciprocalErf, "none"},  {Spelling::PowTanh, "tanh"},      {Spelling::ProductTanh, "tanh"},
  };
  for (const auto& [spelling, approximate] : cases) {
    Graph g;
    const ValueId x = add_input(g, "x", {3, 4});
    const ValueId y = add_gelu_formula(g, x, spelling, "gelu/");
    g.outputs.push_back(y);
    ASSERT_EQ(fuse_gelu(g), 1) << approximate << " spelling " << static_cast<int>(spelling);
    ASSERT_EQ(g.node_count(), 1u);
    const Node& gelu = g.node(g.value(y).producer);
    EXPECT_EQ(gelu.op_type, "Gelu");
    EXPECT_EQ(gelu.attr_string("approximate", ""), approximate);
    EXPECT_EQ(gelu.inputs, std::vector<ValueId>{x});
    EXPECT_EQ(gelu.name.rfind("gelu/", 0), 0u) << gelu.name;
    EXPECT_EQ(g.value(y).shape.to_string(), "(3,4)");
  }
}

// Gives the formula's constant `old` the value `value` and the role `role`.
void set_constant(Graph& g, float old, float value, ValueRole role = ValueRole::Constant) {
  for (ValueId id : g.initializers) {
    Value& v = g.value(id);
    if (v.role != ValueRole::Constant || v.data->data<float>()[0] != old) continue;
    v.data->data<float>()[0] = value;
    v.role = role;
    return;
  }
  FAIL() << "no constant " << old;
}

TEST(FusedGelu, WhatIsNotExactlyTheFormulaStays) {
  const std::vector<std::pair<std::string, std::function<void(Graph&)>>> changes = {
      {"0.6 for 0.5", [](Graph& g) { set_constant(g, 0.5f, 0.6f); }},
      {"sqrt 3 for sqrt 2", [](Graph& g) { set_constant(g, kSqrt2, std::sqrt(3.0f)); }},
      {"2 for 1", [](Graph& g) { set_constant(g, 1.0f, 2.0f); }},
      {"a trained 0.5", [](Graph& g) { set_constant(g, 0.5f, 0.5f, ValueRole::Parameter); }},
      {"the Erf's output read too",
       [](Graph& g) {
         for (NodeId id : g.order())
           if (g.node(id).op_type == "Erf") g.outputs.push_back(g.node(id).outputs[0]);
       }},
  };
  for (const auto& [what, change] : changes) {
    Graph g;
    const ValueId x = add_input(g, "x", {3, 4});
    g.outputs.push_back(add_gelu_formula(g, x, Spelling::TorchScriptErf, "gelu/"));
    change(g);
    const size_t nodes = g.node_count();
    EXPECT_EQ(fuse_gelu(g), 0) << what;
    EXPECT_EQ(g.node_count(), nodes) << what;
  }
  // Twice GELU: x · (1 + erf(x / √2)) has no 0.5.
  Graph g;
  const ValueId x = add_input(g, "x", {3, 4});
  const ValueId a = add_inferred_node(
      g, "add", "Add",
      {add_inferred_node(g, "erf", "Erf", {add_inferred_node(g, "div", "Div", {x, add_scalar(g, "r2", kSqrt2)}, "u")},
                         "e"),
       add_scalar(g, "one", 1)},
      "a");
  g.outputs.push_back(add_inferred_node(g, "mul", "Mul", {x, a}, "y"));
  EXPECT_EQ(fuse_gelu(g), 0);
}

// x (4,6) -> Linear -> GELU (erf) -> Linear -> GELU (tanh) -> Linear: five classes.
Graph mlp_with_gelus() {
  Graph g;
  const ValueId x = add_input(g, "x", {4, 6});
  auto linear = [&](ValueId in, int64_t k, int64_t n, const std::string& p, uint32_t seed) {
    const ValueId w = add_parameter(g, p + ".weight", uniform_tensor({k, n}, seed));
    const ValueId b = add_parameter(g, p + ".bias", uniform_tensor({n}, seed + 1));
    return add_inferred_node(g, p + "/Add", "Add",
                             {add_inferred_node(g, p + "/MatMul", "MatMul", {in, w}, p + "/mm"), b}, p + "/out");
  };
  const ValueId h1 = add_gelu_formula(g, linear(x, 6, 8, "fc1", 1), Spelling::TorchScriptErf, "act1/");
  const ValueId h2 = add_gelu_formula(g, linear(h1, 8, 8, "fc2", 3), Spelling::PowTanh, "act2/");
  g.outputs.push_back(linear(h2, 8, 5, "fc3", 5));
  return g;
}

TEST(FusedGelu, TheTrainingGraphIsFusedTheEvaluationGraphIsNot) {
  const Graph model = mlp_with_gelus();
  const TrainingRecipe r = make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy")});
  EXPECT_EQ(r.fused_gelus, 2);
  size_t gelus = 0, erfs = 0, tanhs = 0;
  for (NodeId id : r.training.graph.order()) {
    const std::string& op = r.training.graph.node(id).op_type;
    gelus += op == "Gelu";
    erfs += op == "Erf";
    tanhs += op == "Tanh";
  }
  EXPECT_EQ(gelus, 2u);
  EXPECT_EQ(erfs + tanhs, 0u);
  size_t evaluation_erfs = 0;
  for (NodeId id : r.evaluation.order()) evaluation_erfs += r.evaluation.node(id).op_type == "Erf";
  EXPECT_EQ(evaluation_erfs, 1u);
  EXPECT_EQ(make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy"), .fuse_gelu = false}).fused_gelus, 0);
  // Under bf16 the formula reads the float32 bias Add after the cast back: fused as well, in float32.
  const TrainingRecipe bf16 =
      make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy"), .precision = Precision::bf16});
  EXPECT_EQ(bf16.fused_gelus, 2);
}

TEST(FusedGelu, TrainingFusedFollowsTrainingAsTheModelHasIt) {
  for (Precision precision : {Precision::fp32, Precision::bf16}) {
    SCOPED_TRACE(precision_name(precision));
    TrainerOptions fused = testing_support::momentum_sgd_options();
    fused.precision = precision;
    TrainerOptions unfused = fused;
    unfused.fuse_gelu = false;
    // bf16: the same float32 formula on the same bfloat16 products (erf's polynomial aside).
    testing_support::expect_close_training(mlp_with_gelus(), fused, unfused, {4, 6}, 5, 6,
                                           precision == Precision::fp32 ? 1e-5 : 1e-3);
  }
}

}  // namespace
}  // namespace onnxtrain
