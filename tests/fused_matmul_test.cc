// graph/autodiff/fused_matmul: which MatMuls of an attention block the training graph fuses, what it folds
// into them (a weight's Transpose, a key's Transpose through its scaling, constant scalings of either
// operand and of the product, bias Adds on either side) and what it leaves (a Transpose another node reads
// too, a MatMul of a 1-D operand, a scaling by a trained or non-scalar factor or read elsewhere, the
// evaluation graph), that the kernels' alpha scales the product, and that training fused follows training
// as the model has it (the same values up to float32 rounding: the products sum in another order).
#include "graph/autodiff/fused_matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "graph/autodiff/training_recipe.h"
#include "graph/fused_activation.h"
#include "kernels/kernel.h"
#include "kernels/onednn/onednn_common.h"
#include "tests/graph_builder.h"
#include "tests/reference_kernel_call.h"
#include "tests/same_training.h"

namespace onnxtrain {
namespace {

using testing_support::add_inferred_node;
using testing_support::add_input;
using testing_support::add_parameter;
using testing_support::add_scalar;
using testing_support::uniform_tensor;

const Attributes kSwapLastTwo{{"perm", std::vector<int64_t>{0, 2, 1}}};

// X (4,6,8): q = X·Transpose(Wq) + bq, k = bk + X·Wk, scores = (0.25·q) · (Transpose(k) · 0.5) / 2 (ViT's
// scaled q and k, BERT's divided scores), P = Softmax, o = P·X; o's transpose feeds a MatMul and a ReduceMean (so it
// stays); logits = h·Wo + bo (2-D): five classes.
Graph attention_model() {
  Graph g;
  const ValueId x = add_input(g, "x", {4, 6, 8});
  const ValueId wq_t = add_inferred_node(g, "wq_t", "Transpose", {add_parameter(g, "wq", uniform_tensor({8, 8}, 1))},
                                         "wq_t_out", {{"perm", std::vector<int64_t>{1, 0}}});
  const ValueId q0 = add_inferred_node(g, "q_mm", "MatMul", {x, wq_t}, "q0");
  const ValueId q = add_inferred_node(g, "q_add", "Add", {q0, add_parameter(g, "bq", uniform_tensor({8}, 2))}, "q");
  const ValueId k0 =
      add_inferred_node(g, "k_mm", "MatMul", {x, add_parameter(g, "wk", uniform_tensor({8, 8}, 3))}, "k0");
  const ValueId k = add_inferred_node(g, "k_add", "Add", {add_parameter(g, "bk", uniform_tensor({8}, 4)), k0}, "k");
  const ValueId kt = add_inferred_node(g, "k_t", "Transpose", {k}, "kt", kSwapLastTwo);
  const ValueId ks = add_inferred_node(g, "k_scale", "Mul", {kt, add_scalar(g, "half", 0.5f)}, "ks");
  const ValueId qs = add_inferred_node(g, "q_scale", "Mul", {add_scalar(g, "quarter", 0.25f), q}, "qs");
  const ValueId s0 = add_inferred_node(g, "scores", "MatMul", {qs, ks}, "s0");
  const ValueId s = add_inferred_node(g, "scores_div", "Div", {s0, add_scalar(g, "two", 2.0f)}, "s");
  const ValueId p = add_inferred_node(g, "softmax", "Softmax", {s}, "p", {{"axis", int64_t{-1}}});
  const ValueId o = add_inferred_node(g, "pv", "MatMul", {p, x}, "o");
  const ValueId ot = add_inferred_node(g, "o_t", "Transpose", {o}, "ot", kSwapLastTwo);  // read twice
  const ValueId oo = add_inferred_node(g, "oo", "MatMul", {ot, o}, "oo");                // (4,8,8)
  const Attributes mean_last{{"axes", std::vector<int64_t>{2}}, {"keepdims", int64_t{0}}};
  const ValueId m = add_inferred_node(g, "mean", "ReduceMean", {ot}, "m", mean_last);
  const ValueId mo = add_inferred_node(g, "mean_oo", "ReduceMean", {oo}, "mo", mean_last);
  const ValueId h = add_inferred_node(g, "h", "Add", {m, mo}, "h_out");  // (4,8)
  const ValueId l0 =
      add_inferred_node(g, "out_mm", "MatMul", {h, add_parameter(g, "wo", uniform_tensor({8, 5}, 5))}, "l0");
  g.outputs.push_back(
      add_inferred_node(g, "out_add", "Add", {l0, add_parameter(g, "bo", uniform_tensor({5}, 6))}, "logits"));
  return g;
}

const Node& producer(const Graph& g, const std::string& value) {
  return g.node(g.value(*g.find_value(value)).producer);
}

const Node& node_named(const Graph& g, const std::string& name) {
  const auto it = std::find_if(g.order().begin(), g.order().end(), [&](NodeId id) { return g.node(id).name == name; });
  EXPECT_NE(it, g.order().end()) << name;
  return g.node(*it);
}

TEST(FusedMatMul, TheTrainingGraphFoldsTransposesScalingAndBiases) {
  const Graph model = attention_model();
  const TrainingRecipe r = make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy")});
  EXPECT_EQ(r.fused_matmuls, 6);  // q, k, scores, pv, oo, out
  const Graph& g = r.training.graph;

  const Node& q = producer(g, "q");  // the Add's output is now the product's
  EXPECT_EQ(q.name, "q_mm");
  EXPECT_EQ(q.op_type, "FusedMatMul");
  EXPECT_EQ(q.attr_int("transA", -1), 0);
  EXPECT_EQ(q.attr_int("transB", -1), 1);  // Wq read transposed in place
  EXPECT_EQ(g.value(q.inputs[1]).name, "wq");
  EXPECT_EQ(g.value(q.inputs[2]).name, "bq");
  const Node& k = producer(g, "k");
  EXPECT_EQ(k.name, "k_mm");
  EXPECT_EQ(g.value(k.inputs[2]).name, "bk");  // the bias was the Add's first operand
  const Node& scores = producer(g, "s");       // the Div's output is now the product's
  EXPECT_EQ(scores.name, "scores");
  EXPECT_EQ(scores.attr_int("transB", -1), 1);  // Transpose(k) · 0.5 became (k · 0.5)ᵀ, then kᵀ and alpha
  EXPECT_EQ(g.value(scores.inputs[0]).name, "q");
  EXPECT_EQ(g.value(scores.inputs[1]).name, "k");
  EXPECT_DOUBLE_EQ(scores.attr_float("alpha", 1.0), 0.25 * 0.5 / 2);
  EXPECT_EQ(q.attr_float("alpha", 1.0), 1.0);
  const Node& oo = producer(g, "oo");
  EXPECT_EQ(oo.op_type, "FusedMatMul");
  EXPECT_EQ(oo.attr_int("transA", -1), 0);  // o_t is also read by the ReduceMean: it stays
  EXPECT_EQ(producer(g, "ot").op_type, "Transpose");
  EXPECT_EQ(producer(g, "logits").name, "out_mm");  // 2-D, with the bias

  size_t forward_transposes = 0, forward_adds = 0, backward_transposes = 0, scalings = 0;
  for (size_t i = 0; i < g.order().size(); ++i) {
    const Node& n = g.node(g.order()[i]);
    const bool forward = i < r.training.forward_node_count;
    forward_transposes += forward && n.op_type == "Transpose";
    forward_adds += forward && n.op_type == "Add";
    backward_transposes += !forward && n.op_type == "Transpose";
    scalings += n.op_type == "Mul" || n.op_type == "Div" ? n.name.rfind("mean", 0) != 0 : 0;  // not ReduceMean's
  }
  EXPECT_EQ(forward_transposes, 1u);   // o_t
  EXPECT_EQ(forward_adds, 1u);         // h
  EXPECT_EQ(backward_transposes, 1u);  // o_t's gradient; the products' gradients take flags
  EXPECT_EQ(scalings, 0u);             // no scaling forward or backward (the ReduceMeans' gradients aside)

  // The evaluation graph keeps the model's nodes; so does training with the fusion off.
  EXPECT_EQ(r.evaluation.node(r.evaluation.value(*r.evaluation.find_value("q")).producer).op_type, "Add");
  const TrainingRecipe off =
      make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy"), .fuse_matmul = false});
  EXPECT_EQ(off.fused_matmuls, 0);
  EXPECT_EQ(producer(off.training.graph, "q").op_type, "Add");
}

TEST(FusedMatMul, NeitherADivisorTransposedNorA1DOperandIsFused) {
  Graph g;
  const ValueId x = add_input(g, "x", {2, 3, 4});
  const ValueId xt = add_inferred_node(g, "x_t", "Transpose", {x}, "xt", kSwapLastTwo);
  const ValueId r = add_inferred_node(g, "recip", "Div", {add_scalar(g, "one", 1.0f), xt}, "r");  // 1 / xᵀ
  const ValueId y = add_inferred_node(g, "mm", "MatMul", {r, add_parameter(g, "w", uniform_tensor({3, 5}, 1))}, "y");
  g.outputs.push_back(add_inferred_node(g, "vec", "MatMul", {y, add_parameter(g, "v", uniform_tensor({5}, 2))}, "z"));
  EXPECT_EQ(fuse_matmul(g), 1);
  EXPECT_EQ(producer(g, "xt").op_type, "Transpose");
  EXPECT_EQ(producer(g, "y").op_type, "FusedMatMul");
  EXPECT_EQ(producer(g, "y").attr_int("transA", -1), 0);
  EXPECT_EQ(producer(g, "z").op_type, "MatMul");
}

// Scalings that stay: by a trained factor (a learnt temperature needs its gradient), by a vector, by zero
// (x / 0), and one whose result another node reads too.
TEST(FusedMatMul, OnlyAConstantScalarScalingReadByTheProductAloneFolds) {
  Graph g;
  const ValueId x = add_input(g, "x", {2, 3, 4});
  const ValueId w = add_parameter(g, "w", uniform_tensor({4, 4}, 1));
  const auto product_of = [&](const std::string& name, ValueId a) {
    return add_inferred_node(g, name, "MatMul", {a, w}, name + "_y");
  };
  const ValueId learnt =
      add_inferred_node(g, "by_param", "Mul", {x, add_parameter(g, "t", uniform_tensor({}, 2))}, "a1");
  const ValueId by_vector =
      add_inferred_node(g, "by_vector", "Mul", {x, add_parameter(g, "v", uniform_tensor({4}, 3))}, "a2");
  const ValueId by_zero = add_inferred_node(g, "by_zero", "Div", {x, add_scalar(g, "zero", 0.0f)}, "a3");
  const ValueId shared = add_inferred_node(g, "shared", "Mul", {x, add_scalar(g, "three", 3.0f)}, "a4");
  for (const auto& [name, a] :
       std::vector<std::pair<std::string, ValueId>>{{"p1", learnt}, {"p2", by_vector}, {"p3", by_zero}, {"p4", shared}})
    g.outputs.push_back(product_of(name, a));
  g.outputs.push_back(shared);  // read by p4 and as an output
  EXPECT_EQ(fuse_matmul(g), 4);
  for (const char* name : {"p1_y", "p2_y", "p3_y", "p4_y"}) {
    const Node& p = producer(g, name);
    EXPECT_EQ(p.op_type, "FusedMatMul") << name;
    EXPECT_EQ(p.attr_float("alpha", 1.0), 1.0) << name;
    EXPECT_NE(g.value(p.inputs[0]).name, "x") << name;
  }
}

// FusedMatMul's alpha on oneDNN's kernel against the reference kernel: batched with either operand
// transposed, rows against a matrix with a bias (alpha·A·Bᵀ + C), in float32.
TEST(FusedMatMul, AlphaScalesTheProductOnEveryKernel) {
  struct Product {
    std::vector<int64_t> a, b, c, y;
    int64_t trans_a, trans_b;
  };
  const std::vector<Product> products = {
      {{2, 3, 5, 4}, {2, 3, 5, 4}, {}, {2, 3, 5, 5}, 0, 1},
      {{2, 3, 5, 5}, {2, 3, 5, 4}, {}, {2, 3, 5, 4}, 1, 0},
      {{6, 2, 8}, {7, 8}, {7}, {6, 2, 7}, 0, 1},
  };
  uint32_t seed = 10;
  for (const Product& p : products) {
    KernelSpec spec{.op_type = "FusedMatMul",
                    .domain = kTrainingDomain,
                    .opset = 1,
                    .attributes = {{"transA", p.trans_a}, {"transB", p.trans_b}, {"alpha", 0.125}},
                    .node_name = "product"};
    std::vector<Tensor> inputs = {uniform_tensor(p.a, seed++), uniform_tensor(p.b, seed++)};
    if (!p.c.empty()) inputs.push_back(uniform_tensor(p.c, seed++));
    spec.inputs = testing_support::input_descs(inputs);
    spec.outputs = {{DType::Float32, p.y}};
    const Tensor expected = testing_support::run_prepared(
        *KernelRegistry::builtin()
             .find(kTrainingDomain, "FusedMatMul", DeviceKind::Cpu, DType::Float32, "reference")
             ->prepare(spec),
        inputs, spec.outputs)[0];
    const Tensor got = testing_support::run_prepared(
        *KernelRegistry::builtin().find(kTrainingDomain, "FusedMatMul", DeviceKind::Cpu, DType::Float32)->prepare(spec),
        inputs, spec.outputs)[0];
    // The unscaled product, to show that alpha changed something.
    Attributes unscaled = spec.attributes;
    unscaled.erase("alpha");
    KernelSpec plain = spec;
    plain.attributes = unscaled;
    const Tensor product = testing_support::run_prepared(
        *KernelRegistry::builtin()
             .find(kTrainingDomain, "FusedMatMul", DeviceKind::Cpu, DType::Float32, "reference")
             ->prepare(plain),
        inputs, spec.outputs)[0];
    const auto e = expected.data<float>(), o = got.data<float>(), u = product.data<float>();
    const auto c = p.c.empty() ? std::span<const float>() : inputs[2].data<float>();
    for (size_t i = 0; i < e.size(); ++i) {
      EXPECT_NEAR(o[i], e[i], 1e-6) << "product " << &p - products.data() << " element " << i;
      const float bias = c.empty() ? 0.0f : c[i % c.size()];
      EXPECT_NEAR(e[i], 0.125f * (u[i] - bias) + bias, 1e-6) << "product " << &p - products.data() << " element " << i;
    }
  }
}

// A tied embedding: Gather reads W, the output layer Transpose(W). Folded, a pipeline split would find W
// read by two stages (LanguageModelCli's T5 on gpipe with 2 stages); the Transpose stays.
TEST(FusedMatMul, ATiedWeightsTransposeStays) {
  Graph g;
  const ValueId ids =
      g.add_value({.name = "ids", .dtype = DType::Int64, .shape = Shape::of({4}), .role = ValueRole::Input});
  g.inputs.push_back(ids);
  const ValueId w = add_parameter(g, "w", uniform_tensor({5, 8}, 1));
  const ValueId e = add_inferred_node(g, "embed", "Gather", {w, ids}, "e");
  const ValueId e3 =
      add_inferred_node(g, "e3", "Unsqueeze", {e, add_parameter(g, "axes", Tensor::vector_int64({0}))}, "e3");
  const ValueId wt = add_inferred_node(g, "w_t", "Transpose", {w}, "wt", {{"perm", std::vector<int64_t>{1, 0}}});
  g.outputs.push_back(add_inferred_node(g, "lm_head", "MatMul", {e3, wt}, "logits"));
  EXPECT_EQ(fuse_matmul(g), 1);
  EXPECT_EQ(producer(g, "wt").op_type, "Transpose");
  EXPECT_EQ(producer(g, "logits").attr_int("transB", -1), 0);
}

// oneDNN keeps its JIT kernels for the ViT's products read through strides (a reference implementation
// would be correct and some hundred times slower): rows against a transposed weight with the bias, and
// the attention's batched products with either operand transposed.
TEST(FusedMatMul, TheViTsProductsRunOnOneDnnsJitKernels) {
  struct Product {
    std::vector<int64_t> a, b, c, y;
    int64_t trans_a, trans_b;
  };
  const std::vector<Product> products = {
      {{65, 4, 256}, {768, 256}, {768}, {65, 4, 768}, 0, 1},       // input projection, batch 4
      {{4, 8, 65, 32}, {4, 8, 65, 32}, {}, {4, 8, 65, 65}, 0, 1},  // q·kᵀ
      {{4, 8, 65, 65}, {4, 8, 65, 32}, {}, {4, 8, 65, 32}, 1, 0},  // pᵀ·dy: dv
  };
  for (const Product& p : products) {
    KernelSpec spec{.op_type = "FusedMatMul",
                    .domain = kTrainingDomain,
                    .opset = 1,
                    .attributes = {{"transA", p.trans_a}, {"transB", p.trans_b}},
                    .node_name = "product"};
    spec.inputs = {{DType::Float32, p.a}, {DType::Float32, p.b}};
    if (!p.c.empty()) spec.inputs.push_back({DType::Float32, p.c});
    spec.outputs = {{DType::Float32, p.y}};
    const KernelEntry* entry =
        KernelRegistry::builtin().find(kTrainingDomain, "FusedMatMul", DeviceKind::Cpu, DType::Float32);
    ASSERT_NE(entry, nullptr);
    EXPECT_EQ(entry->implementation, "onednn");
    const std::unique_ptr<Kernel> kernel = entry->prepare(spec);
    const auto* reports = dynamic_cast<const onednn::ReportsImplementation*>(kernel.get());
    ASSERT_NE(reports, nullptr) << "fell back to the reference kernel";
    const std::string implementation = reports->library_implementation();
    EXPECT_NE(implementation.rfind("ref", 0), 0u) << implementation;
    EXPECT_TRUE(implementation.find("brg") != std::string::npos || implementation.find("jit") != std::string::npos ||
                implementation.find("gemm") != std::string::npos)
        << implementation;
  }
}

// A product with its bias costs what Gemm's does: the product's multiply-adds and one add per output each
// way, so the partitioner prices a fused linear layer as the Gemm it would otherwise be.
TEST(FusedMatMul, CostsWhatGemmDoes) {
  for (const char* op : {"Gemm", "FusedMatMul"}) {
    Graph g;
    const ValueId x = add_input(g, "x", {2, 784});
    const ValueId w = add_parameter(g, "w", uniform_tensor({10, 784}, 1));
    const ValueId b = add_parameter(g, "b", uniform_tensor({10}, 2));
    const ValueId y = g.add_value({.name = "y"});
    const std::string domain = op == std::string("Gemm") ? "" : kTrainingDomain;
    const OpSchema& schema = *OpRegistry::builtin().find(domain, op);
    const NodeId n = g.add_node({.name = "fc",
                                 .op_type = op,
                                 .domain = domain,
                                 .opset = domain.empty() ? 17 : 1,
                                 .inputs = {x, w, b},
                                 .outputs = {y},
                                 .attributes = {{"transB", int64_t{1}}}});
    infer_node(g, n, schema);
    const OpCost cost = node_cost(g, n, schema, {});
    EXPECT_DOUBLE_EQ(cost.forward_flops, 2.0 * 2 * 10 * 784 + 20) << op;
    EXPECT_DOUBLE_EQ(cost.backward_flops, 4.0 * 2 * 10 * 784 + 20) << op;
  }
}

// Under bf16 the products fuse before autocast: autocast casts the FusedMatMuls' operands, the Transposes
// and scalings stay folded (not float32 passes between the Casts), and each product writes its float32
// result itself (float32_output) with its alpha and its float32 bias: no cast back, no bias Add.
TEST(FusedMatMul, UnderBf16AutocastCastsTheFusedProducts) {
  const TrainingRecipe r =
      make_training_recipe(attention_model(), {.loss = parse_loss_spec("cross-entropy"), .precision = Precision::bf16});
  EXPECT_EQ(r.fused_matmuls, 6);
  const Graph& g = r.training.graph;
  const Node& scores = node_named(g, "scores");
  EXPECT_EQ(scores.op_type, "FusedMatMul");
  EXPECT_EQ(scores.attr_int("transB", -1), 1);
  EXPECT_DOUBLE_EQ(scores.attr_float("alpha", 1.0), 0.25 * 0.5 / 2);
  const Node& q = producer(g, "q");
  EXPECT_EQ(q.name, "q_mm");
  ASSERT_EQ(q.inputs.size(), 3u);
  EXPECT_EQ(g.value(q.inputs[2]).name, "bq");
  EXPECT_EQ(g.value(q.inputs[2]).dtype, DType::Float32);
  for (const Node* n : {&scores, &q}) {
    EXPECT_EQ(n->attr_int("float32_output", 0), 1) << n->name;
    EXPECT_EQ(g.value(n->outputs[0]).dtype, DType::Float32) << n->name;
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(g.value(n->inputs[i]).dtype, DType::BFloat16) << n->name;
      EXPECT_EQ(g.node(g.value(n->inputs[i]).producer).op_type, "Cast") << n->name;
    }
  }
  EXPECT_EQ(g.value(g.node(g.value(q.inputs[1]).producer).inputs[0]).name, "wq");  // Wq read transposed in place
  size_t forward_transposes = 0, scalings = 0, forward_adds = 0, casts_to_float = 0;
  for (size_t i = 0; i < g.order().size(); ++i) {
    const Node& n = g.node(g.order()[i]);
    const bool forward = i < r.training.forward_node_count;
    forward_transposes += forward && n.op_type == "Transpose";
    forward_adds += forward && n.op_type == "Add";
    casts_to_float += forward && n.op_type == "Cast" && n.attr_int("to", 0) == 1;
    scalings += n.op_type == "Mul" || n.op_type == "Div" ? n.name.rfind("mean", 0) != 0 : 0;
  }
  EXPECT_EQ(forward_transposes, 1u);  // o_t, read twice
  EXPECT_EQ(forward_adds, 1u);        // h
  EXPECT_EQ(casts_to_float, 0u);      // no product's result is cast back
  EXPECT_EQ(scalings, 0u);
}

TEST(FusedMatMul, UnderBf16TrainingFusedFollowsTrainingUnfused) {
  TrainerOptions fused = testing_support::momentum_sgd_options();
  fused.precision = Precision::bf16;
  TrainerOptions unfused = fused;
  unfused.fuse_matmul = false;
  testing_support::expect_close_training(attention_model(), fused, unfused, {4, 6, 8}, 5, 6, 2e-2);
}

// X (4,6,8) → MatMul (W 8x16) → Add (b) → Relu → MatMul (16x5) → ReduceMean over the 6 rows: a Linear and a
// ReLU over 3-D inputs, which MatMul + Add + Relu export. add_relu.h fuses the Relu into the Add first; the
// bias then stays out of the product (it was folded in, and the Relu lost: trained as the Linear alone).
Graph linear_relu_model() {
  Graph g;
  const ValueId x = add_input(g, "x", {4, 6, 8});
  const ValueId h0 =
      add_inferred_node(g, "fc1", "MatMul", {x, add_parameter(g, "w1", uniform_tensor({8, 16}, 7))}, "h0");
  const ValueId h = add_inferred_node(g, "fc1_bias", "Add", {h0, add_parameter(g, "b1", uniform_tensor({16}, 8))}, "h");
  const ValueId r = add_inferred_node(g, "relu", "Relu", {h}, "r");
  const ValueId o = add_inferred_node(g, "fc2", "MatMul", {r, add_parameter(g, "w2", uniform_tensor({16, 5}, 9))}, "o");
  g.outputs.push_back(add_inferred_node(g, "mean", "ReduceMean", {o}, "logits",
                                        {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}));
  return g;
}

TEST(FusedMatMul, ABiasAddFusedWithItsReluKeepsTheRelu) {
  const TrainingRecipe r = make_training_recipe(linear_relu_model(), {.loss = parse_loss_spec("cross-entropy")});
  EXPECT_EQ(r.fused_add_relus, 1);
  EXPECT_TRUE(fuses_relu(producer(r.training.graph, "r").attributes));
  TrainerOptions fused = testing_support::momentum_sgd_options(), apart = fused;
  apart.fuse_matmul = false;
  apart.fuse_add_relu = false;
  testing_support::expect_close_training(linear_relu_model(), fused, apart, {4, 6, 8}, 5, 6, 1e-5);
}

TEST(FusedMatMul, TrainingFusedFollowsTrainingAsTheModelHasIt) {
  const TrainerOptions fused = testing_support::momentum_sgd_options();
  TrainerOptions unfused = fused;
  unfused.fuse_matmul = false;
  testing_support::expect_close_training(attention_model(), fused, unfused, {4, 6, 8}, 5, 6, 1e-5);
}

}  // namespace
}  // namespace onnxtrain
