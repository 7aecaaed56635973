// graph/autodiff/gather_before_transpose: slices gathered after a Transpose are gathered before it when
// they keep the input's order (nn.MultiheadAttention's q, k, v split, by hand and in torchvision's ViT as
// both exporters write it), and training with the rewrite is training without it, bit for bit (it only
// moves copies). What would need a transpose of the slice, or a Transpose something else reads, stays.
#include "graph/autodiff/gather_before_transpose.h"

#include <gtest/gtest.h>

#include "frontend/importer.h"
#include "graph/autodiff/training_recipe.h"
#include "tests/graph_builder.h"
#include "tests/same_training.h"

namespace onnxtrain {
namespace {

using testing_support::add_inferred_node;
using testing_support::add_input;
using testing_support::add_parameter;
using testing_support::uniform_tensor;

const std::string kTinyVit = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/mha/tiny_vit_";

ValueId add_ints(Graph& g, const std::string& name, const std::vector<int64_t>& values) {
  const ValueId v = g.add_value({.name = name,
                                 .dtype = DType::Int64,
                                 .shape = Shape::of({static_cast<int64_t>(values.size())}),
                                 .role = ValueRole::Buffer,
                                 .data = Tensor::vector_int64(values)});
  g.initializers.push_back(v);
  return v;
}

ValueId add_index(Graph& g, int64_t i) {
  const ValueId v = g.add_value({.name = "index" + std::to_string(i),
                                 .dtype = DType::Int64,
                                 .shape = Shape::of({}),
                                 .role = ValueRole::Buffer,
                                 .data = Tensor::scalar_int64(i)});
  g.initializers.push_back(v);
  return v;
}

size_t count_ops(const Graph& g, const std::string& op) {
  size_t n = 0;
  for (NodeId id : g.order()) n += g.node(id).op_type == op;
  return n;
}

// x (4,6) -> p = x·W (4,12) -> (4,3,4) -> unsqueeze(0) -> transpose(0,-2) (3,4,1,4) -> squeeze(-2) (3,4,4)
// -> q, k, v = p[0], p[1], p[2] -> (q·k + v)·Wo: five classes. torch's packed in-projection, batch first.
Graph packed_projection_model() {
  Graph g;
  const ValueId x = add_input(g, "x", {4, 6});
  const ValueId p = add_inferred_node(g, "proj", "MatMul", {x, add_parameter(g, "w", uniform_tensor({6, 12}, 1))}, "p");
  const ValueId p3 = add_inferred_node(g, "unflatten", "Reshape", {p, add_ints(g, "sizes", {4, 3, 4})}, "p3");
  const ValueId u = add_inferred_node(g, "unsqueeze", "Unsqueeze", {p3, add_ints(g, "zero", {0})}, "u");
  const ValueId t =
      add_inferred_node(g, "transpose", "Transpose", {u}, "t", {{"perm", std::vector<int64_t>{2, 1, 0, 3}}});
  const ValueId s = add_inferred_node(g, "squeeze", "Squeeze", {t, add_ints(g, "minus_two", {-2})}, "s");
  std::vector<ValueId> qkv;
  for (int64_t i = 0; i < 3; ++i)
    qkv.push_back(
        add_inferred_node(g, "gather" + std::to_string(i), "Gather", {s, add_index(g, i)}, "qkv" + std::to_string(i)));
  const ValueId qk = add_inferred_node(g, "qk", "Mul", {qkv[0], qkv[1]}, "qk");
  const ValueId h = add_inferred_node(g, "plus_v", "Add", {qk, qkv[2]}, "h");
  g.outputs.push_back(
      add_inferred_node(g, "out", "MatMul", {h, add_parameter(g, "wo", uniform_tensor({4, 5}, 2))}, "logits"));
  return g;
}

TEST(GatherBeforeTranspose, TheSlicesOfAPackedProjectionComeFromItsAxis) {
  Graph g = packed_projection_model();
  ASSERT_EQ(gather_before_transpose(g), 1);
  EXPECT_EQ(count_ops(g, "Transpose"), 0u);
  for (int i = 0; i < 3; ++i) {
    const ValueId slice = *g.find_value("qkv" + std::to_string(i));
    EXPECT_EQ(g.value(slice).shape.to_string(), "(4,4)");
    const Node& squeeze = g.node(g.value(slice).producer);  // drops the unsqueezed 1
    ASSERT_EQ(squeeze.op_type, "Squeeze");
    EXPECT_EQ(g.value(squeeze.inputs[1]).data->to_int64(), std::vector<int64_t>{0});
    const Node& gather = g.node(g.value(squeeze.inputs[0]).producer);
    ASSERT_EQ(gather.op_type, "Gather");
    EXPECT_EQ(g.value(gather.inputs[0]).name, "u");
    EXPECT_EQ(gather.attr_int("axis", -1), 2);  // the 3 of (1,4,3,4)
    EXPECT_EQ(g.value(gather.outputs[0]).shape.to_string(), "(1,4,4)");
  }
}

TEST(GatherBeforeTranspose, TrainingIsTheSameBitForBit) {
  TrainerOptions on = testing_support::momentum_sgd_options();
  TrainerOptions off = on;
  off.gather_before_transpose = false;
  testing_support::expect_same_training(packed_projection_model(), on, off, {4, 6}, 5);
}

TEST(GatherBeforeTranspose, SlicesThatWouldNeedATransposeStay) {
  {  // (2,3,4) -> perm (1,0,2) -> x[..., 0]: the slice (3,2) holds the input's (2,3) transposed
    Graph g;
    const ValueId t = add_inferred_node(g, "t", "Transpose", {add_input(g, "x", {2, 3, 4})}, "t",
                                        {{"perm", std::vector<int64_t>{1, 0, 2}}});
    g.outputs.push_back(add_inferred_node(g, "g", "Gather", {t, add_index(g, 0)}, "y", {{"axis", int64_t{2}}}));
    EXPECT_EQ(gather_before_transpose(g), 0);
  }
  {  // the same perm, sliced on axis 0: y = x[:, 1, :], (2,4) in the input's order: moves
    Graph g;
    const ValueId t = add_inferred_node(g, "t", "Transpose", {add_input(g, "x", {2, 3, 4})}, "t",
                                        {{"perm", std::vector<int64_t>{1, 0, 2}}});
    g.outputs.push_back(add_inferred_node(g, "g", "Gather", {t, add_index(g, 1)}, "y"));
    EXPECT_EQ(gather_before_transpose(g), 1);
    const Node& gather = g.node(g.value(*g.find_value("y")).producer);
    EXPECT_EQ(gather.attr_int("axis", -1), 1);
    EXPECT_EQ(g.value(*g.find_value("y")).shape.to_string(), "(2,4)");
  }
  {  // the Transpose is also read whole
    Graph g = packed_projection_model();
    g.outputs.push_back(*g.find_value("t"));
    EXPECT_EQ(gather_before_transpose(g), 0);
  }
  {  // an index that is not a constant
    Graph g;
    const ValueId t = add_inferred_node(g, "t", "Transpose", {add_input(g, "x", {2, 3, 4})}, "t",
                                        {{"perm", std::vector<int64_t>{1, 0, 2}}});
    const ValueId i =
        g.add_value({.name = "i", .dtype = DType::Int64, .shape = Shape::of({}), .role = ValueRole::Input});
    g.inputs.push_back(i);
    g.outputs.push_back(add_inferred_node(g, "g", "Gather", {t, i}, "y"));
    EXPECT_EQ(gather_before_transpose(g), 0);
  }
}

// torchvision's VisionTransformer as torch.onnx writes it (tests/data/mha/make_tiny_vit.py): its one
// attention's (3,1,2,0,4) Transpose goes in both exports, and its GELU becomes one Gelu; training follows
// training without the two rewrites (Gelu within float32 rounding of its formula).
TEST(GatherBeforeTranspose, TorchvisionsViTFromBothExporters) {
  for (const std::string exporter : {"torchscript", "dynamo"}) {
    const ImportedModel model = import_model(kTinyVit + exporter + ".onnx");
    const TrainingRecipe r = make_training_recipe(model.graph, {.loss = parse_loss_spec("cross-entropy")});
    EXPECT_EQ(r.transposes_after_gathers, 1) << exporter;
    EXPECT_EQ(r.fused_gelus, 1) << exporter;
    const TrainingRecipe off = make_training_recipe(
        model.graph, {.loss = parse_loss_spec("cross-entropy"), .fuse_gelu = false, .gather_before_transpose = false});
    EXPECT_EQ(count_ops(r.training.graph, "Transpose") + 2, count_ops(off.training.graph, "Transpose")) << exporter;

    TrainerOptions on = testing_support::momentum_sgd_options();
    TrainerOptions plain = on;
    plain.gather_before_transpose = plain.fuse_gelu = false;
    testing_support::expect_close_training(model.graph, on, plain, {4, 3, 8, 8}, 3, 4, 1e-5);
  }
}

}  // namespace
}  // namespace onnxtrain
