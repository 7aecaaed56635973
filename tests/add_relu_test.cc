// graph/autodiff/add_relu: which Add + Relu pairs the training graph fuses (not the evaluation graph, not an
// Add whose output another node reads; under bf16 too), that training fused gives what training them apart
// gives, bit for bit, and that the cpu and reference kernels compute the fused Add as Relu(Add) does,
// broadcasting included.
#include "graph/autodiff/add_relu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

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

// X (4,3,6,6) → Conv → s1 = Add(conv, X-projection) → Relu (fusable) → Conv → s2 = Add(conv, bias of
// shape (1,5,1,1), broadcast) → Relu (fusable) → s3 = Add(that, itself) read by a Relu and by the pool
// (not fusable) → GlobalAveragePool → Flatten: five logits.
Graph residual_model() {
  Graph g;
  const ValueId x = add_input(g, "x", {4, 3, 6, 6});
  const ValueId h1 = add_inferred_node(g, "conv1", "Conv", {x, add_parameter(g, "w1", uniform_tensor({8, 3, 3, 3}, 1))},
                                       "h1", conv2d_attributes(1, 1));
  const ValueId p = add_inferred_node(g, "proj", "Conv", {x, add_parameter(g, "wp", uniform_tensor({8, 3, 1, 1}, 2))},
                                      "p", conv2d_attributes(1, 0));
  const ValueId r1 = add_inferred_node(g, "relu1", "Relu", {add_inferred_node(g, "add1", "Add", {h1, p}, "s1")}, "r1");
  const ValueId h2 = add_inferred_node(
      g, "conv2", "Conv", {r1, add_parameter(g, "w2", uniform_tensor({5, 8, 3, 3}, 3))}, "h2", conv2d_attributes(1, 1));
  const ValueId b = add_parameter(g, "b", uniform_tensor({1, 5, 1, 1}, 4));
  const ValueId r2 = add_inferred_node(g, "relu2", "Relu", {add_inferred_node(g, "add2", "Add", {h2, b}, "s2")}, "r2");
  const ValueId s3 = add_inferred_node(g, "add3", "Add", {r2, r2}, "s3");
  const ValueId r3 = add_inferred_node(g, "relu3", "Relu", {s3}, "r3");
  const ValueId both = add_inferred_node(g, "add4", "Add", {r3, s3}, "s4");
  const ValueId pooled = add_inferred_node(g, "pool", "GlobalAveragePool", {both}, "pooled");
  g.outputs.push_back(add_inferred_node(g, "flatten", "Flatten", {pooled}, "logits", {{"axis", int64_t{1}}}));
  return g;
}

TEST(AddRelu, TheTrainingGraphFusesAnAddThatOnlyAReluReads) {
  const Graph model = residual_model();
  const TrainingRecipe r = make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy")});
  EXPECT_EQ(r.fused_add_relus, 2);  // add1 and add2 (broadcast); add3's output is also read by add4
  const Graph& g = r.training.graph;
  EXPECT_EQ(count_op(g, "Relu"), 1u);
  for (const char* fused : {"r1", "r2"}) {
    const NodeId add = g.value(*g.find_value(fused)).producer;
    ASSERT_TRUE(add.valid()) << fused;
    EXPECT_EQ(g.node(add).op_type, "Add") << fused;
    EXPECT_TRUE(fuses_relu(g.node(add).attributes)) << fused;
  }
  // Each fused Add's gradient is masked by its output, as Relu's rule reads it; r2's gradient comes in two
  // parts (add3 reads it twice), which that ActivationGrad takes as its first and third inputs, unsummed.
  int masks = 0;
  for (NodeId id : g.order()) {
    const Node& n = g.node(id);
    if (n.op_type != "ActivationGrad") continue;
    const std::string& at = g.value(n.inputs[1]).name;
    if (at != "r1" && at != "r2") continue;
    ++masks;
    EXPECT_EQ(n.inputs.size(), at == "r2" ? 3u : 2u) << at;
  }
  EXPECT_EQ(masks, 2);
  EXPECT_EQ(count_op(r.evaluation, "Relu"), 3u);  // evaluation (and the written model) keep the pairs

  TrainingRecipeOptions off{.loss = parse_loss_spec("cross-entropy")};
  off.fuse_add_relu = false;
  EXPECT_EQ(make_training_recipe(model, off).fused_add_relus, 0);
  TrainingRecipeOptions gpu{.loss = parse_loss_spec("cross-entropy")};
  gpu.set_cpu_rewrites(false);
  EXPECT_EQ(make_training_recipe(model, gpu).fused_add_relus, 0);
  // Under bf16 the Adds and Relus stay float32 (autocast casts the convolutions' operands): fused as well.
  const TrainingRecipe bf16 =
      make_training_recipe(model, {.loss = parse_loss_spec("cross-entropy"), .precision = Precision::bf16});
  EXPECT_EQ(bf16.fused_add_relus, 2);
  EXPECT_EQ(count_op(bf16.training.graph, "Relu"), 1u);
}

TEST(AddRelu, TrainingFusedEqualsTrainingApartBitForBit) {
  for (Precision precision : {Precision::fp32, Precision::bf16}) {
    SCOPED_TRACE(precision_name(precision));
    TrainerOptions fused = testing_support::momentum_sgd_options();
    fused.precision = precision;
    TrainerOptions apart = fused;
    apart.fuse_add_relu = false;
    testing_support::expect_same_training(residual_model(), fused, apart, {4, 3, 6, 6}, 5);
  }
}

std::vector<Tensor> run(const KernelSpec& spec, const char* implementation, const std::vector<Tensor>& inputs) {
  const KernelEntry* entry =
      KernelRegistry::builtin().find(spec.domain, spec.op_type, DeviceKind::Cpu, DType::Float32, implementation);
  EXPECT_NE(entry, nullptr) << spec.op_type << " " << implementation;
  return testing_support::run_prepared(*entry->prepare(spec), inputs, spec.outputs);
}

// The cpu and reference kernels of the fused Add against Relu(Add) by the reference kernels, with NaN,
// both zeros and infinities among the sums, and a broadcast operand.
TEST(AddRelu, TheFusedKernelsComputeReluOfTheSum) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const Ints& b_shape : {Ints{2, 3, 4, 5}, Ints{1, 3, 1, 1}}) {
    SCOPED_TRACE(Shape::of(b_shape).to_string());
    const Ints shape{2, 3, 4, 5};
    Tensor a = uniform_tensor(shape, 11), b = uniform_tensor(b_shape, 12);
    std::span<float> av = a.data<float>();
    av[0] = nan, av[1] = -0.0f, av[2] = inf, av[3] = -inf, av[4] = 0.0f;
    KernelSpec add{.op_type = "Add", .opset = 14, .node_name = "add"};
    add.inputs = testing_support::input_descs({a, b});
    add.outputs = {{DType::Float32, shape}};
    KernelSpec relu{.op_type = "Relu", .opset = 14, .node_name = "relu"};
    relu.inputs = {{DType::Float32, shape}};
    relu.outputs = {{DType::Float32, shape}};
    const Tensor sum = run(add, "reference", {a, b})[0];
    const Tensor want = run(relu, "reference", {sum})[0];
    add.attributes[kFusedActivation] = std::string("Relu");
    for (const char* implementation : {"cpu", "reference"}) {
      SCOPED_TRACE(implementation);
      const Tensor got = run(add, implementation, {a, b})[0];
      for (int64_t i = 0; i < got.numel(); ++i) {
        const float g = got.data<float>()[i], w = want.data<float>()[i];
        if (std::isnan(w)) {
          EXPECT_TRUE(std::isnan(g)) << "element " << i;
        } else {
          EXPECT_EQ(g, w) << "element " << i;
        }
      }
    }
  }
}

// ActivationGrad with the gradient's second part dY2, on the default kernel (oneDNN's, which hands it to the
// "cpu" one), the "cpu" one and the reference: the derivative of dY + dY2, as a Sum and then ActivationGrad
// compute it, for Relu (the fused Add's) and activations that take other paths in the "cpu" kernel.
TEST(AddRelu, ActivationGradAddsTheSecondPartOfTheGradient) {
  const Ints shape{3, 700};  // more than one block of the "cpu" kernel's exp passes
  const Tensor dy = uniform_tensor(shape, 21), dy2 = uniform_tensor(shape, 22), x = uniform_tensor(shape, 23);
  for (const char* activation : {"Relu", "Selu", "Erf", "Clip", "HardSigmoid", "Tanh"}) {
    SCOPED_TRACE(activation);
    KernelSpec sum{.op_type = "Add", .opset = 14, .node_name = "sum"};
    sum.inputs = testing_support::input_descs({dy, dy2});
    sum.outputs = {{DType::Float32, shape}};
    KernelSpec grad{.op_type = "ActivationGrad",
                    .domain = "ai.onnxtrain",
                    .opset = 1,
                    .attributes = {{"activation", std::string(activation)}},
                    .node_name = "grad"};
    if (std::string(activation) == "Clip") grad.attributes["alpha"] = -0.5, grad.attributes["beta"] = 0.5;
    grad.inputs = testing_support::input_descs({dy, x});
    grad.outputs = {{DType::Float32, shape}};
    const Tensor total = run(sum, "reference", {dy, dy2})[0];
    const Tensor want = run(grad, "reference", {total, x})[0];
    grad.inputs = testing_support::input_descs({dy, x, dy2});
    for (const char* implementation : {"", "cpu", "reference"}) {
      SCOPED_TRACE(implementation);
      const Tensor got = run(grad, implementation, {dy, x, dy2})[0];
      for (int64_t i = 0; i < got.numel(); ++i)
        ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 2e-6f * (1 + std::abs(want.data<float>()[i])))
            << "element " << i;
    }
  }
}

}  // namespace
}  // namespace onnxtrain
