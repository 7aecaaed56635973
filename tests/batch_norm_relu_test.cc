// graph/autodiff/batch_norm_relu: which BatchNormalization + Relu pairs the training graph fuses (not the
// evaluation graph, not a BatchNorm whose output another node reads; under bf16 too), that training fused gives
// what training them apart gives, bit for bit (the same values summed in the same order), and that the
// plain-layout kernels and the reference kernels compute the fused pair as the unfused reference does:
// max(BN(X), 0) forward, and the gradient of dY masked where that output is 0.
#include "graph/autodiff/batch_norm_relu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "graph/autodiff/training_recipe.h"
#include "tests/graph_builder.h"
#include "tests/reference_kernel_call.h"
#include "tests/same_training.h"

namespace onnxtrain {
namespace {

using testing_support::add_inferred_node;
using testing_support::add_input;
using testing_support::add_parameter;
using testing_support::conv2d_attributes;
using testing_support::count_op;
using testing_support::uniform_tensor;
using Ints = std::vector<int64_t>;

ValueId add_state(Graph& g, const std::string& name, const Tensor& value) {
  const ValueId v = g.add_value({.name = name,
                                 .dtype = value.dtype(),
                                 .shape = Shape::of(value.sizes()),
                                 .role = ValueRole::State,
                                 .data = value});
  g.initializers.push_back(v);
  return v;
}

// A BatchNormalization in inference mode (as exported for eval) over `x` with C channels.
ValueId batch_norm(Graph& g, const std::string& name, ValueId x, int64_t c, uint32_t seed) {
  Tensor var = uniform_tensor({c}, seed + 3);
  for (float& v : var.data<float>()) v = 1.0f + std::abs(v);
  return add_inferred_node(
      g, name, "BatchNormalization",
      {x, add_parameter(g, name + ".scale", uniform_tensor({c}, seed)),
       add_parameter(g, name + ".bias", uniform_tensor({c}, seed + 1)),
       add_state(g, name + ".mean", uniform_tensor({c}, seed + 2)), add_state(g, name + ".var", var)},
      name + "_out");
}

// X (4,3,6,6) → Conv → BN1 → Relu (fusable) → Conv → BN2 → Relu, and BN2's output also added to that
// Relu's (not fusable) → GlobalAveragePool → Flatten: six logits.
Graph conv_batch_norm_relu_model() {
  Graph g;
  const ValueId x = add_input(g, "x", {4, 3, 6, 6});
  const ValueId h1 = add_inferred_node(g, "conv1", "Conv", {x, add_parameter(g, "w1", uniform_tensor({8, 3, 3, 3}, 1))},
                                       "h1", conv2d_attributes(1, 1));
  const ValueId r1 = add_inferred_node(g, "relu1", "Relu", {batch_norm(g, "bn1", h1, 8, 10)}, "r1");
  const ValueId h2 = add_inferred_node(
      g, "conv2", "Conv", {r1, add_parameter(g, "w2", uniform_tensor({6, 8, 3, 3}, 2))}, "h2", conv2d_attributes(2, 1));
  const ValueId b2 = batch_norm(g, "bn2", h2, 6, 20);
  const ValueId r2 = add_inferred_node(g, "relu2", "Relu", {b2}, "r2");
  const ValueId s = add_inferred_node(g, "add", "Add", {r2, b2}, "s");
  const ValueId p = add_inferred_node(g, "pool", "GlobalAveragePool", {s}, "p");
  g.outputs.push_back(add_inferred_node(g, "flatten", "Flatten", {p}, "logits", {{"axis", int64_t{1}}}));
  return g;
}

TEST(BatchNormRelu, TheTrainingGraphFusesABatchNormThatOnlyAReluReads) {
  const Graph model = conv_batch_norm_relu_model();
  const TrainingRecipe r = make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy")});
  EXPECT_EQ(r.fused_batch_norm_relus, 1);
  const Graph& g = r.training.graph;
  EXPECT_EQ(count_op(g, "Relu"), 1u);  // relu2 stays: the Add reads BN2's output too
  const NodeId bn1 = g.value(*g.find_value("r1")).producer;
  ASSERT_TRUE(bn1.valid());
  EXPECT_EQ(g.node(bn1).name, "bn1");
  EXPECT_EQ(g.node(bn1).attr_string(kFusedActivation, ""), "Relu");
  int masked = 0;
  for (NodeId id : g.order()) {
    const Node& n = g.node(id);
    if (n.op_type != "BatchNormalizationGrad") continue;
    if (fuses_relu(n.attributes)) {
      ASSERT_EQ(n.inputs.size(), 6u);
      EXPECT_EQ(g.value(n.inputs[5]).name, "r1");  // masked by the fused output
      ++masked;
    }
  }
  EXPECT_EQ(masked, 1);
  EXPECT_EQ(count_op(r.evaluation, "Relu"), 2u);  // evaluation (and the written model) keep the pair

  const TrainingRecipe off =
      make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy"), .fuse_batch_norm_relu = false});
  EXPECT_EQ(off.fused_batch_norm_relus, 0);
  EXPECT_EQ(count_op(off.training.graph, "Relu"), 2u);
  // Under bf16 the BatchNorms and Relus stay float32 (autocast casts the convolutions' operands): fused
  // as well.
  const TrainingRecipe bf16 =
      make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy"), .precision = Precision::bf16});
  EXPECT_EQ(bf16.fused_batch_norm_relus, 1);
  EXPECT_EQ(count_op(bf16.training.graph, "Relu"), 1u);
}

TEST(BatchNormRelu, TrainingFusedEqualsTrainingApartBitForBit) {
  for (Precision precision : {Precision::fp32, Precision::bf16}) {
    SCOPED_TRACE(precision_name(precision));
    TrainerOptions fused = testing_support::momentum_sgd_options();
    fused.precision = precision;
    TrainerOptions apart = fused;
    apart.fuse_batch_norm_relu = false;
    testing_support::expect_same_training(conv_batch_norm_relu_model(), fused, apart, {4, 3, 6, 6}, 6);
  }
}

Tensor random_tensor(std::mt19937& rng, const Ints& sizes, float lo, float hi) {
  std::uniform_real_distribution<float> real(lo, hi);
  Tensor t(DType::Float32, sizes);
  for (float& v : t.data<float>()) v = real(rng);
  return t;
}

std::vector<Tensor> run(const KernelSpec& spec, const char* implementation, const std::vector<Tensor>& inputs) {
  const std::unique_ptr<Kernel> kernel =
      KernelRegistry::builtin()
          .find(spec.domain, spec.op_type, DeviceKind::Cpu, DType::Float32, implementation)
          ->prepare(spec);
  return testing_support::run_prepared(*kernel, inputs, spec.outputs);
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-5 + 1e-4 * std::abs(want.data<float>()[i]))
        << what << " element " << i;
}

// The plain-layout loops (rows of 16 or more, small planes, one value per channel) and the reference
// kernel, fused, against the unfused reference with the Relu and its mask applied by hand.
TEST(BatchNormRelu, TheFusedKernelsComputeTheUnfusedPair) {
  for (const Ints& shape : {Ints{4, 20, 5, 5}, Ints{8, 16, 2, 2}, Ints{6, 24, 1}}) {
    SCOPED_TRACE(std::to_string(shape[1]) + " channels of " + std::to_string(shape.back()));
    std::mt19937 rng(71);
    const int64_t c = shape[1];
    const Tensor x = random_tensor(rng, shape, -1, 3), dz = random_tensor(rng, shape, -1, 1);
    const Tensor scale = random_tensor(rng, {c}, 0.5, 1.5), bias = random_tensor(rng, {c}, -1, 1);
    const Tensor mean = random_tensor(rng, {c}, -1, 1), var = random_tensor(rng, {c}, 1, 2);
    KernelSpec forward{
        .op_type = "BatchNormalization", .opset = 15, .attributes = {{"training_mode", int64_t{1}}}, .node_name = "bn"};
    forward.inputs = testing_support::input_descs({x, scale, bias, mean, var});
    forward.outputs = {{DType::Float32, shape}, {DType::Float32, {c}}, {DType::Float32, {c}}};
    const std::vector<Tensor> unfused = run(forward, "reference", {x, scale, bias, mean, var});
    Tensor z = unfused[0].clone();
    for (float& v : z.data<float>()) v = std::max(v, 0.0f);
    Tensor dy = dz.clone();  // the Relu's gradient, by hand
    for (int64_t i = 0; i < dy.numel(); ++i)
      if (!(z.data<float>()[i] > 0)) dy.data<float>()[i] = 0;
    KernelSpec backward{.op_type = "BatchNormalizationGrad",
                        .domain = "ai.onnxtrain",
                        .opset = 1,
                        .attributes = {{"training_mode", int64_t{1}}},
                        .node_name = "bn_grad"};
    backward.inputs = testing_support::input_descs({dy, x, scale, mean, var});
    backward.outputs = {{DType::Float32, shape}, {DType::Float32, {c}}, {DType::Float32, {c}}};
    const std::vector<Tensor> want = run(backward, "reference", {dy, x, scale, mean, var});

    forward.attributes[kFusedActivation] = std::string("Relu");
    backward.attributes[kFusedActivation] = std::string("Relu");
    backward.inputs = testing_support::input_descs({dz, x, scale, mean, var, z});
    for (const char* implementation : {"onednn", "reference"}) {
      SCOPED_TRACE(implementation);
      const std::vector<Tensor> fused = run(forward, implementation, {x, scale, bias, mean, var});
      expect_close(fused[0], z, "Y");
      expect_close(fused[1], unfused[1], "running mean");
      const std::vector<Tensor> grads = run(backward, implementation, {dz, x, scale, mean, var, z});
      for (size_t o = 0; o < 3; ++o) expect_close(grads[o], want[o], "gradient output " + std::to_string(o));
    }
  }
}

}  // namespace
}  // namespace onnxtrain
