// Shape and data-movement op schemas: shape inference with symbolic dims, known values, constant
// folding, opset differences and the errors a user can cause.
#include <gtest/gtest.h>

#include <cstdint>

#include "graph/graph.h"
#include "graph/op_schema.h"

using namespace onnxtrain;

namespace {

Tensor floats(std::vector<int64_t> sizes, const std::vector<float>& values) {
  Tensor t(DType::Float32, std::move(sizes));
  std::copy(values.begin(), values.end(), t.data<float>().begin());
  return t;
}

Tensor bools(std::vector<int64_t> sizes, const std::vector<bool>& values) {
  Tensor t(DType::Bool, std::move(sizes));
  for (size_t i = 0; i < values.size(); ++i) t.data<uint8_t>()[i] = values[i];
  return t;
}

Tensor int32s(std::vector<int64_t> sizes, const std::vector<int32_t>& values) {
  Tensor t(DType::Int32, std::move(sizes));
  std::copy(values.begin(), values.end(), t.data<int32_t>().begin());
  return t;
}

std::vector<float> float_values(const Tensor& t) {
  auto span = t.data<float>();
  return {span.begin(), span.end()};
}

const Dim N = Dim::symbol("N");

class ShapeOps : public ::testing::Test {
 protected:
  Graph g;
  int counter = 0;

  ValueId input(DType dtype, Shape shape) {
    ValueId id = g.add_value({.name = "in" + std::to_string(counter++),
                              .dtype = dtype,
                              .shape = std::move(shape),
                              .role = ValueRole::Input});
    g.inputs.push_back(id);
    return id;
  }
  ValueId input(Shape shape) { return input(DType::Float32, std::move(shape)); }
  ValueId constant(Tensor t) {
    ValueId id = g.add_value({.name = "c" + std::to_string(counter++),
                              .dtype = t.dtype(),
                              .shape = Shape::of(t.sizes()),
                              .role = ValueRole::Constant,
                              .data = t});
    g.initializers.push_back(id);
    return id;
  }
  ValueId ints(const std::vector<int64_t>& values) { return constant(Tensor::vector_int64(values)); }
  ValueId scalar(int64_t v) { return constant(Tensor::scalar_int64(v)); }

  // Adds a node, runs its shape inference and returns it.
  NodeId add(const std::string& op, std::vector<ValueId> inputs, Attributes attrs = {}, int opset = 17,
             int outputs = 1) {
    std::vector<ValueId> outs;
    for (int i = 0; i < outputs; ++i) outs.push_back(g.add_value({.name = op + "_out" + std::to_string(counter++)}));
    NodeId id = g.add_node({.name = op + "_" + std::to_string(counter++),
                            .op_type = op,
                            .opset = opset,
                            .inputs = std::move(inputs),
                            .outputs = outs,
                            .attributes = std::move(attrs)});
    const OpSchema* schema = OpRegistry::builtin().find("", op);
    EXPECT_NE(schema, nullptr) << op;
    infer_node(g, id, *schema);
    return id;
  }
  const Value& out(NodeId n, size_t i = 0) { return g.value(g.node(n).outputs[i]); }
  ValueId out_id(NodeId n, size_t i = 0) { return g.node(n).outputs[i]; }
  std::string shape(NodeId n, size_t i = 0) { return out(n, i).shape.to_string(); }
  std::string known(NodeId n, size_t i = 0) {
    const auto& k = out(n, i).known;
    return k ? Shape(*k).to_string() : "none";
  }

  // Runs the op's constant evaluator on the node's (constant) inputs.
  std::vector<Tensor> fold(NodeId n) {
    const Node& node = g.node(n);
    FoldContext ctx{node, {}, {}};
    for (ValueId in : node.inputs) ctx.inputs.push_back(in.valid() ? *g.value(in).data : Tensor());
    for (ValueId o : node.outputs) ctx.output_shapes.push_back(g.value(o).shape);
    return OpRegistry::builtin().find("", node.op_type)->fold(ctx);
  }
  // Adds the node and folds it in one go.
  Tensor fold_op(const std::string& op, std::vector<ValueId> inputs, Attributes attrs = {}, int opset = 17) {
    NodeId n = add(op, std::move(inputs), std::move(attrs), opset);
    std::vector<Tensor> r = fold(n);
    EXPECT_EQ(Shape::of(r.at(0).sizes()), out(n).shape) << op << " fold and inference disagree";
    return r.at(0);
  }

  // Expects the node to fail shape inference with an Error naming it and containing `needle`.
  void expect_error(const std::string& op, std::vector<ValueId> inputs, Attributes attrs, int opset,
                    const std::string& needle, int outputs = 1) {
    try {
      add(op, std::move(inputs), std::move(attrs), opset, outputs);
      ADD_FAILURE() << op << " did not fail (expected '" << needle << "')";
    } catch (const Error& e) {
      EXPECT_TRUE(e.has_node()) << e.what();
      EXPECT_EQ(e.op_type(), op);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
};

// --- Shape, Size, Gather ------------------------------------------------------------------------

TEST_F(ShapeOps, ShapeCarriesSymbolicDimsAsKnownValues) {
  ValueId x = input(Shape({N, 3, 224, 224}));
  NodeId s = add("Shape", {x});
  EXPECT_EQ(out(s).dtype, DType::Int64);
  EXPECT_EQ(shape(s), "(4)");
  EXPECT_EQ(known(s), "(N,3,224,224)");

  NodeId sliced = add("Shape", {x}, {{"start", int64_t{1}}, {"end", int64_t{-1}}}, 15);
  EXPECT_EQ(shape(sliced), "(2)");
  EXPECT_EQ(known(sliced), "(3,224)");
  NodeId clipped = add("Shape", {x}, {{"start", int64_t{-10}}, {"end", int64_t{10}}}, 15);
  EXPECT_EQ(known(clipped), "(N,3,224,224)");
  NodeId empty = add("Shape", {x}, {{"start", int64_t{3}}, {"end", int64_t{1}}}, 15);
  EXPECT_EQ(shape(empty), "(0)");

  NodeId unknown = add("Shape", {input(Shape::unknown_rank())});
  EXPECT_EQ(shape(unknown), "(?)");
  EXPECT_EQ(known(unknown), "none");

  NodeId folded = add("Shape", {constant(floats({2, 3}, {1, 2, 3, 4, 5, 6}))}, {{"start", int64_t{-1}}}, 15);
  EXPECT_EQ(fold(folded)[0].to_int64(), (std::vector<int64_t>{3}));
}

TEST_F(ShapeOps, SizeIsASymbolicScalar) {
  NodeId s = add("Size", {input(Shape({N, 16, 7, 7}))});
  EXPECT_EQ(shape(s), "()");
  EXPECT_EQ(known(s), "(784*N)");
  EXPECT_EQ(fold_op("Size", {constant(floats({2, 3}, {1, 2, 3, 4, 5, 6}))}).to_int64(), (std::vector<int64_t>{6}));
}

TEST_F(ShapeOps, GatherShapesAndKnownValues) {
  NodeId g1 = add("Gather", {input(Shape::of({5, 4, 3})), input(DType::Int64, Shape({N, 2}))}, {{"axis", int64_t{1}}});
  EXPECT_EQ(shape(g1), "(5,N,2,3)");

  NodeId shape_of = add("Shape", {input(Shape({N, 16, 7, 7}))});
  NodeId batch = add("Gather", {out_id(shape_of), scalar(0)}, {{"axis", int64_t{0}}});
  EXPECT_EQ(shape(batch), "()");
  EXPECT_EQ(known(batch), "(N)");
  NodeId tail = add("Gather", {out_id(shape_of), ints({-1, 1})});
  EXPECT_EQ(known(tail), "(7,16)");

  expect_error("Gather", {input(Shape::of({5, 4})), ints({5})}, {}, 13, "index 5 is out of range for axis 0 of size 5");
  expect_error("Gather", {input(Shape::of({5, 4})), ints({0})}, {{"axis", int64_t{2}}}, 13,
               "axis 2 is out of range for rank 2");
  expect_error("Gather", {input(Shape::of({5})), input(Shape::of({1}))}, {}, 13, "indices must be int32 or int64");
  EXPECT_EQ(shape(add("Gather", {input(Shape::unknown_rank()), scalar(0)})), "(?)");
}

TEST_F(ShapeOps, GatherFolds) {
  ValueId data = constant(floats({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}));
  ValueId indices = constant(Tensor::vector_int64({0, 2, -1}).reshaped({1, 3}));
  Tensor r = fold_op("Gather", {data, indices}, {{"axis", int64_t{1}}});
  EXPECT_EQ(r.sizes(), (std::vector<int64_t>{3, 1, 3}));
  EXPECT_EQ(float_values(r), (std::vector<float>{1, 3, 3, 4, 6, 6, 7, 9, 9}));
  Tensor rows = fold_op("Gather", {data, constant(int32s({2}, {2, 0}))});
  EXPECT_EQ(float_values(rows), (std::vector<float>{7, 8, 9, 1, 2, 3}));
}

// --- Unsqueeze, Squeeze -------------------------------------------------------------------------

TEST_F(ShapeOps, UnsqueezeAttributeBeforeOpset13InputFrom13) {
  ValueId x = input(Shape({N, 4, 5}));
  EXPECT_EQ(shape(add("Unsqueeze", {x}, {{"axes", std::vector<int64_t>{0, -1}}}, 11)), "(1,N,4,5,1)");
  EXPECT_EQ(shape(add("Unsqueeze", {x, ints({4, 3})}, {}, 13)), "(N,4,5,1,1)");
  EXPECT_EQ(shape(add("Unsqueeze", {x, input(DType::Int64, Shape::of({2}))}, {}, 13)), "(?,?,?,?,?)");

  NodeId batch = add("Gather", {out_id(add("Shape", {x})), scalar(0)});
  NodeId vec = add("Unsqueeze", {out_id(batch), ints({0})}, {}, 13);
  EXPECT_EQ(shape(vec), "(1)");
  EXPECT_EQ(known(vec), "(N)");

  expect_error("Unsqueeze", {x, ints({5})}, {}, 13, "axis 5 is out of range for rank 4");
  expect_error("Unsqueeze", {x, ints({1, 1})}, {}, 13, "repeated");
  expect_error("Unsqueeze", {x}, {}, 13, "the axes input is required");
  expect_error("Unsqueeze", {x}, {{"axes", std::vector<int64_t>{0}}}, 13, "is an input, not an attribute");

  Tensor r = fold_op("Unsqueeze", {constant(floats({2}, {1, 2})), ints({0})}, {}, 13);
  EXPECT_EQ(r.sizes(), (std::vector<int64_t>{1, 2}));
}

TEST_F(ShapeOps, SqueezeAttributeBeforeOpset13InputFrom13) {
  ValueId x = input(Shape({1, N, 1, 5}));
  EXPECT_EQ(shape(add("Squeeze", {x}, {{"axes", std::vector<int64_t>{0}}}, 11)), "(N,1,5)");
  EXPECT_EQ(shape(add("Squeeze", {x, ints({0, -2})}, {}, 13)), "(N,5)");
  // Without axes a symbolic dim might be 1 at run time: the rank cannot be known.
  EXPECT_EQ(shape(add("Squeeze", {x}, {}, 13)), "(?)");
  EXPECT_EQ(shape(add("Squeeze", {input(Shape::of({1, 3, 1}))}, {}, 13)), "(3)");

  NodeId one = add("Slice", {out_id(add("Shape", {x})), ints({1}), ints({2})}, {}, 13);
  NodeId scalar_n = add("Squeeze", {out_id(one), ints({0})}, {}, 13);
  EXPECT_EQ(shape(scalar_n), "()");
  EXPECT_EQ(known(scalar_n), "(N)");

  expect_error("Squeeze", {x, ints({3})}, {}, 13, "cannot squeeze axis 3 of size 5");
  expect_error("Squeeze", {x}, {{"axes", std::vector<int64_t>{4}}}, 11, "axis 4 is out of range for rank 4");

  EXPECT_EQ(fold_op("Squeeze", {constant(floats({1, 2, 1}, {3, 4}))}, {}, 13).sizes(), (std::vector<int64_t>{2}));
  EXPECT_EQ(fold_op("Squeeze", {constant(floats({1, 2, 1}, {3, 4}))}, {{"axes", std::vector<int64_t>{2}}}, 11).sizes(),
            (std::vector<int64_t>{1, 2}));
}

// --- Concat, Split ------------------------------------------------------------------------------

TEST_F(ShapeOps, ConcatAddsSymbolicDims) {
  ValueId a = input(Shape({N, 3, 4, 4}));
  EXPECT_EQ(shape(add("Concat", {a, a}, {{"axis", int64_t{0}}})), "(2*N,3,4,4)");
  EXPECT_EQ(shape(add("Concat", {a, input(Shape({N, 5, 4, 4}))}, {{"axis", int64_t{-3}}})), "(N,8,4,4)");
  EXPECT_EQ(shape(add("Concat", {a, input(Shape::unknown_rank())}, {{"axis", int64_t{1}}})), "(N,?,4,4)");
  EXPECT_EQ(shape(add("Concat", {input(Shape::unknown_rank())}, {{"axis", int64_t{1}}})), "(?)");

  expect_error("Concat", {a, a, input(Shape({N, 3, 4}))}, {{"axis", int64_t{1}}}, 13, "input 2 has rank 3, expected 4");
  expect_error("Concat", {a, a}, {{"axis", int64_t{4}}}, 13, "axis 4 is out of range for rank 4");
  expect_error("Concat", {a, input(Shape({N, 3, 5, 4}))}, {{"axis", int64_t{1}}}, 13, "in dim 2");
  expect_error("Concat", {a, input(DType::Int64, Shape({N, 3, 4, 4}))}, {{"axis", int64_t{0}}}, 13,
               "input 1 has dtype int64");
  expect_error("Concat", {a}, {}, 13, "the axis attribute is required");
}

TEST_F(ShapeOps, ConcatFoldsAnyDtype) {
  Tensor r = fold_op("Concat", {constant(floats({2, 1}, {1, 2})), constant(floats({2, 2}, {3, 4, 5, 6}))},
                     {{"axis", int64_t{1}}});
  EXPECT_EQ(float_values(r), (std::vector<float>{1, 3, 4, 2, 5, 6}));
  Tensor b =
      fold_op("Concat", {constant(bools({1}, {true})), constant(bools({2}, {false, true}))}, {{"axis", int64_t{0}}});
  EXPECT_EQ(b.to_int64(), (std::vector<int64_t>{1, 0, 1}));
}

TEST_F(ShapeOps, SplitOpsetDifferences) {
  ValueId x = input(Shape({N, 6}));
  NodeId attr = add("Split", {x}, {{"axis", int64_t{1}}, {"split", std::vector<int64_t>{2, 4}}}, 11, 2);
  EXPECT_EQ(shape(attr, 0), "(N,2)");
  EXPECT_EQ(shape(attr, 1), "(N,4)");
  NodeId input13 = add("Split", {x, ints({1, 5})}, {{"axis", int64_t{-1}}}, 13, 2);
  EXPECT_EQ(shape(input13, 1), "(N,5)");
  NodeId even = add("Split", {x}, {{"axis", int64_t{1}}}, 13, 3);
  EXPECT_EQ(shape(even, 2), "(N,2)");
  NodeId batch = add("Split", {input(Shape({Dim::symbol("N", 4), 6}))}, {}, 13, 2);
  EXPECT_EQ(shape(batch, 0), "(2*N,6)");

  ValueId seven = input(Shape::of({7}));
  expect_error("Split", {seven}, {}, 13, "cannot be split into 3 outputs of equal size", 3);
  NodeId uneven = add("Split", {seven}, {{"num_outputs", int64_t{3}}}, 18, 3);
  EXPECT_EQ(shape(uneven, 0), "(3)");
  EXPECT_EQ(shape(uneven, 2), "(1)");
  expect_error("Split", {seven}, {{"num_outputs", int64_t{2}}}, 18, "num_outputs is 2 but the node has 3 outputs", 3);
  expect_error("Split", {seven, ints({3, 4})}, {{"num_outputs", int64_t{2}}}, 18, "not both", 2);
  expect_error("Split", {seven, ints({3, 3})}, {}, 13, "sums to 6 but axis 0 has size 7", 2);
  expect_error("Split", {seven, ints({7})}, {}, 13, "has 1 entries but the node has 2 outputs", 2);

  NodeId parts = add("Split", {out_id(add("Shape", {input(Shape({N, 3, 8}))})), ints({1, 2})}, {}, 13, 2);
  EXPECT_EQ(known(parts, 0), "(N)");
  EXPECT_EQ(known(parts, 1), "(3,8)");

  NodeId f = add("Split", {constant(floats({5}, {1, 2, 3, 4, 5}))}, {{"num_outputs", int64_t{2}}}, 18, 2);
  std::vector<Tensor> r = fold(f);
  EXPECT_EQ(float_values(r[0]), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(float_values(r[1]), (std::vector<float>{4, 5}));
  NodeId f11 = add("Split", {constant(floats({2, 3}, {1, 2, 3, 4, 5, 6}))},
                   {{"axis", int64_t{1}}, {"split", std::vector<int64_t>{1, 2}}}, 11, 2);
  EXPECT_EQ(float_values(fold(f11)[1]), (std::vector<float>{2, 3, 5, 6}));
}

// --- Reshape, Flatten and the exporter chain ----------------------------------------------------

TEST_F(ShapeOps, ReshapeInfersSymbolically) {
  ValueId x = input(Shape({N, 16, 7, 7}));
  EXPECT_EQ(shape(add("Reshape", {x, ints({-1, 784})})), "(N,784)");
  EXPECT_EQ(shape(add("Reshape", {x, ints({0, -1})})), "(N,784)");
  EXPECT_EQ(shape(add("Reshape", {x, ints({0, 4, 4, -1})})), "(N,4,4,49)");
  EXPECT_EQ(shape(add("Reshape", {x}, {{"shape", std::vector<int64_t>{0, 784}}}, 4)), "(N,784)");
  EXPECT_EQ(shape(add("Reshape", {x, input(DType::Int64, Shape::of({3}))})), "(?,?,?)");
  EXPECT_EQ(shape(add("Reshape", {input(Shape::of({0, 3})), ints({3, 0})}, {{"allowzero", int64_t{1}}}, 14)), "(3,0)");

  expect_error("Reshape", {input(Shape({N, 10})), ints({3, 7})}, {}, 13,
               "cannot reshape (N,10) to (3,7): 10*N elements vs 21");
  expect_error("Reshape", {input(Shape::of({2, 5})), ints({3, -1})}, {}, 13, "10 elements are not a multiple of 3");
  expect_error("Reshape", {x, ints({-1, -1})}, {}, 13, "more than one -1");
  expect_error("Reshape", {input(Shape::of({2})), ints({0, 0})}, {}, 13, "does not exist");
  expect_error("Reshape", {x, ints({0, -1})}, {{"allowzero", int64_t{1}}}, 14, "both 0 and -1");
  expect_error("Reshape", {x}, {}, 13, "the shape input is required");

  Tensor r = fold_op("Reshape", {constant(floats({2, 3}, {1, 2, 3, 4, 5, 6})), ints({3, -1})});
  EXPECT_EQ(r.sizes(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(float_values(r), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST_F(ShapeOps, ExporterReshapeChainWithSymbolicBatch) {
  // Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])), as PyTorch exports x.view(x.size(0), -1).
  ValueId x = input(Shape({N, 16, 7, 7}));
  NodeId shape_of = add("Shape", {x}, {}, 13);
  NodeId batch = add("Gather", {out_id(shape_of), scalar(0)}, {{"axis", int64_t{0}}}, 13);
  NodeId batch_vec = add("Unsqueeze", {out_id(batch), ints({0})}, {}, 13);
  NodeId target = add("Concat", {out_id(batch_vec), ints({-1})}, {{"axis", int64_t{0}}}, 13);
  EXPECT_EQ(known(target), "(N,-1)");
  NodeId reshaped = add("Reshape", {x, out_id(target)}, {}, 13);
  EXPECT_EQ(shape(reshaped), "(N,784)");

  // With opset-11 Unsqueeze (axes attribute), Cast round trips and a known-vector Reshape in between.
  NodeId as32 = add("Cast", {out_id(batch)}, {{"to", int64_t{6}}}, 11);
  NodeId back = add("Cast", {out_id(as32)}, {{"to", int64_t{7}}}, 11);
  NodeId vec11 = add("Unsqueeze", {out_id(back)}, {{"axes", std::vector<int64_t>{0}}}, 11);
  NodeId flat = add("Reshape", {out_id(vec11), ints({-1})}, {}, 11);
  NodeId target11 = add("Concat", {out_id(flat), ints({16}), ints({-1})}, {{"axis", int64_t{0}}}, 11);
  EXPECT_EQ(shape(add("Reshape", {x, out_id(target11)}, {}, 11)), "(N,16,49)");
}

TEST_F(ShapeOps, FlattenMultipliesDims) {
  ValueId x = input(Shape({N, 16, 7, 7}));
  EXPECT_EQ(shape(add("Flatten", {x})), "(N,784)");
  EXPECT_EQ(shape(add("Flatten", {x}, {{"axis", int64_t{0}}})), "(1,784*N)");
  EXPECT_EQ(shape(add("Flatten", {x}, {{"axis", int64_t{4}}})), "(784*N,1)");
  EXPECT_EQ(shape(add("Flatten", {x}, {{"axis", int64_t{-1}}})), "(112*N,7)");
  EXPECT_EQ(shape(add("Flatten", {input(Shape::unknown_rank())})), "(?,?)");
  expect_error("Flatten", {x}, {{"axis", int64_t{5}}}, 13, "axis 5 is out of range for rank 4");
  EXPECT_EQ(fold_op("Flatten", {constant(floats({2, 3, 1}, {1, 2, 3, 4, 5, 6}))}, {{"axis", int64_t{2}}}).sizes(),
            (std::vector<int64_t>{6, 1}));
}

// --- Slice, Transpose ---------------------------------------------------------------------------

TEST_F(ShapeOps, SliceAttributesBeforeOpset10InputsFrom10) {
  ValueId x = input(Shape({N, 20, 10, 5}));
  Attributes attrs = {{"starts", std::vector<int64_t>{0, 1}},
                      {"ends", std::vector<int64_t>{3, 1000}},
                      {"axes", std::vector<int64_t>{1, 3}}};
  EXPECT_EQ(shape(add("Slice", {x}, attrs, 9)), "(N,3,10,4)");
  EXPECT_EQ(shape(add("Slice", {x, ints({0, 1}), ints({3, 1000}), ints({1, -1})}, {}, 13)), "(N,3,10,4)");
  EXPECT_EQ(shape(add("Slice", {x, ints({-3}), ints({-1}), ints({2})}, {}, 13)), "(N,20,2,5)");
  EXPECT_EQ(shape(add("Slice", {x, ints({0}), ints({INT64_MAX}), ints({0})}, {}, 13)), "(N,20,10,5)");
  EXPECT_EQ(shape(add("Slice", {x, ints({0}), ints({2}), ints({0})}, {}, 13)), "(?,20,10,5)");
  EXPECT_EQ(shape(add("Slice", {x, ints({20}), ints({0}), ints({1}), ints({-3})}, {}, 13)), "(N,7,10,5)");
  EXPECT_EQ(shape(add("Slice", {x, ints({5}), ints({1}), ints({2})}, {}, 13)), "(N,20,0,5)");
  EXPECT_EQ(shape(add("Slice", {x, input(DType::Int64, Shape::of({1})), ints({1}), ints({2})}, {}, 13)), "(N,20,?,5)");

  NodeId dims = add("Slice", {out_id(add("Shape", {x})), ints({-2}), ints({INT64_MAX})}, {}, 13);
  EXPECT_EQ(known(dims), "(10,5)");

  expect_error("Slice", {x, ints({0}), ints({1}), ints({1}), ints({0})}, {}, 13, "step 0");
  expect_error("Slice", {x, ints({0}), ints({1}), ints({4})}, {}, 13, "axis 4 is out of range for rank 4");
  expect_error("Slice", {x, ints({0, 0}), ints({1})}, {}, 13, "must have the same length");
  expect_error("Slice", {x}, {}, 13, "the starts and ends inputs are required");
  expect_error("Slice", {x}, {{"starts", std::vector<int64_t>{0}}}, 9, "attributes are required");
}

TEST_F(ShapeOps, SliceFoldsWithNegativeSteps) {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i);
  ValueId data = constant(floats({2, 3, 4}, v));
  Tensor r = fold_op("Slice", {data, ints({-1, 3}), ints({INT64_MIN, 0}), ints({2, 1}), ints({-2, -2})}, {}, 13);
  EXPECT_EQ(r.sizes(), (std::vector<int64_t>{2, 1, 2}));
  EXPECT_EQ(float_values(r), (std::vector<float>{11, 9, 23, 21}));
  Tensor a = fold_op("Slice", {data}, {{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{2}}}, 9);
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(float_values(a)[0], 12);
}

TEST_F(ShapeOps, TransposePermutes) {
  ValueId x = input(Shape({N, 3, 5}));
  EXPECT_EQ(shape(add("Transpose", {x})), "(5,3,N)");
  EXPECT_EQ(shape(add("Transpose", {x}, {{"perm", std::vector<int64_t>{0, 2, 1}}})), "(N,5,3)");
  EXPECT_EQ(shape(add("Transpose", {input(Shape::unknown_rank())}, {{"perm", std::vector<int64_t>{1, 0}}})), "(?,?)");
  expect_error("Transpose", {x}, {{"perm", std::vector<int64_t>{0, 1}}}, 13, "is not a permutation of 0..2");
  expect_error("Transpose", {x}, {{"perm", std::vector<int64_t>{0, 1, 1}}}, 13, "is not a permutation");
  Tensor r = fold_op("Transpose", {constant(floats({2, 3}, {1, 2, 3, 4, 5, 6}))});
  EXPECT_EQ(r.sizes(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(float_values(r), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

// --- Expand, Tile -------------------------------------------------------------------------------

TEST_F(ShapeOps, ExpandBroadcastsToAKnownShape) {
  EXPECT_EQ(shape(add("Expand", {input(Shape::of({3, 1})), ints({2, 1, 6})})), "(2,3,6)");
  ValueId x = input(Shape({N, 1, 4}));
  NodeId target = add("Shape", {input(Shape({N, 3, 4}))});
  EXPECT_EQ(shape(add("Expand", {x, out_id(target)})), "(N,3,4)");
  EXPECT_EQ(shape(add("Expand", {x, input(DType::Int64, Shape::of({4}))})), "(?,?,?,?)");
  expect_error("Expand", {input(Shape::of({2, 3})), ints({4, 3})}, {}, 13, "cannot expand (2,3) to shape (4,3)");

  Tensor r = fold_op("Expand", {constant(floats({3, 1}, {1, 2, 3})), ints({2, 1, 2})});
  EXPECT_EQ(r.sizes(), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(float_values(r), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
}

TEST_F(ShapeOps, TileRepeats) {
  EXPECT_EQ(shape(add("Tile", {input(Shape({N, 3})), ints({2, 2})})), "(2*N,6)");
  EXPECT_EQ(shape(add("Tile", {input(Shape({N, 3})), input(DType::Int64, Shape::of({2}))})), "(?,?)");
  expect_error("Tile", {input(Shape({N, 3})), ints({2})}, {}, 13, "repeats has 1 entries for an input of rank 2");
  Tensor r = fold_op("Tile", {constant(floats({2, 2}, {0, 1, 2, 3})), ints({2, 2})});
  EXPECT_EQ(r.sizes(), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(float_values(r), (std::vector<float>{0, 1, 0, 1, 2, 3, 2, 3, 0, 1, 0, 1, 2, 3, 2, 3}));
}

// --- Cast, CastLike, Identity -------------------------------------------------------------------

TEST_F(ShapeOps, CastConvertsAndKeepsKnownInts) {
  ValueId x = input(Shape({N, 3}));
  NodeId c = add("Cast", {x}, {{"to", int64_t{7}}});
  EXPECT_EQ(out(c).dtype, DType::Int64);
  EXPECT_EQ(shape(c), "(N,3)");
  EXPECT_EQ(out(add("Cast", {x}, {{"to", std::string("DOUBLE")}}, 1)).dtype, DType::Float64);
  NodeId narrowed = add("Cast", {out_id(add("Shape", {x}))}, {{"to", int64_t{6}}});
  EXPECT_EQ(known(narrowed), "(N,3)");
  NodeId flags = add("Cast", {ints({0, 5})}, {{"to", int64_t{9}}});
  EXPECT_EQ(known(flags), "(0,1)");

  expect_error("Cast", {x}, {}, 13, "the 'to' attribute is required");
  expect_error("Cast", {x}, {{"to", int64_t{8}}}, 13, "not supported");

  Tensor r = fold_op("Cast", {constant(floats({4}, {1.9f, -1.9f, 0.0f, 3.0f}))}, {{"to", int64_t{7}}});
  EXPECT_EQ(r.to_int64(), (std::vector<int64_t>{1, -1, 0, 3}));
  Tensor b = fold_op("Cast", {constant(floats({3}, {0.0f, 0.5f, -2.0f}))}, {{"to", int64_t{9}}});
  EXPECT_EQ(b.to_int64(), (std::vector<int64_t>{0, 1, 1}));
  Tensor half = fold_op("Cast", {constant(floats({4}, {1.0f, 65504.0f, 1e-7f, 0.1f}))}, {{"to", int64_t{10}}});
  auto bits = half.data<uint16_t>();
  EXPECT_EQ(bits[0], 0x3c00);
  EXPECT_EQ(bits[1], 0x7bff);
  EXPECT_EQ(bits[2], 0x0002);  // subnormal: 1e-7 / 2^-24 = 1.68 rounds to 2
  EXPECT_EQ(bits[3], 0x2e66);
  Tensor back = fold_op("Cast", {constant(half)}, {{"to", int64_t{1}}});
  EXPECT_FLOAT_EQ(float_values(back)[3], 0.0999755859375f);
  Tensor wide = fold_op("Cast", {constant(int32s({2}, {-7, 40000}))}, {{"to", int64_t{11}}});
  EXPECT_EQ(wide.data<double>()[0], -7.0);
}

TEST_F(ShapeOps, CastLikeAndIdentity) {
  NodeId like = add("CastLike", {input(Shape({N, 2})), input(DType::Float16, Shape::of({1}))}, {}, 15);
  EXPECT_EQ(out(like).dtype, DType::Float16);
  EXPECT_EQ(shape(like), "(N,2)");
  Tensor r = fold_op("CastLike", {constant(Tensor::vector_int64({3, -2})), constant(floats({1}, {0}))}, {}, 15);
  EXPECT_EQ(float_values(r), (std::vector<float>{3, -2}));

  NodeId id = add("Identity", {out_id(add("Shape", {input(Shape({N, 2}))}))});
  EXPECT_EQ(known(id), "(N,2)");
  EXPECT_EQ(float_values(fold_op("Identity", {constant(floats({2}, {4, 5}))})), (std::vector<float>{4, 5}));
}

// --- Constant, ConstantOfShape, Range -----------------------------------------------------------

TEST_F(ShapeOps, ConstantAttributes) {
  NodeId t = add("Constant", {}, {{"value", floats({2, 2}, {1, 2, 3, 4})}});
  EXPECT_EQ(shape(t), "(2,2)");
  EXPECT_EQ(float_values(fold(t)[0]), (std::vector<float>{1, 2, 3, 4}));
  NodeId f = add("Constant", {}, {{"value_float", 2.5}});
  EXPECT_EQ(out(f).dtype, DType::Float32);
  EXPECT_EQ(shape(f), "()");
  EXPECT_EQ(float_values(fold(f)[0]), (std::vector<float>{2.5f}));
  EXPECT_EQ(shape(add("Constant", {}, {{"value_floats", std::vector<double>{1, 2, 3}}})), "(3)");
  NodeId i = add("Constant", {}, {{"value_ints", std::vector<int64_t>{-1, 784}}});
  EXPECT_EQ(known(i), "(-1,784)");
  EXPECT_EQ(known(add("Constant", {}, {{"value_int", int64_t{7}}})), "(7)");

  expect_error("Constant", {}, {{"value_string", std::string("hi")}}, 13, "string constants are not supported");
  expect_error("Constant", {}, {{"sparse_value", std::string("<unsupported attribute type 11>")}}, 13,
               "sparse constants (sparse_value) are not supported");
  expect_error("Constant", {}, {}, 13, "exactly one value attribute is required, got 0");
  expect_error("Constant", {}, {{"value_int", int64_t{1}}, {"value_float", 1.0}}, 13, "got 2");
}

TEST_F(ShapeOps, ConstantOfShapeFillsAKnownShape) {
  NodeId zeros = add("ConstantOfShape", {out_id(add("Shape", {input(Shape({N, 3}))}))});
  EXPECT_EQ(out(zeros).dtype, DType::Float32);
  EXPECT_EQ(shape(zeros), "(N,3)");
  NodeId ones = add("ConstantOfShape", {ints({3})}, {{"value", Tensor::vector_int64({1})}});
  EXPECT_EQ(out(ones).dtype, DType::Int64);
  EXPECT_EQ(known(ones), "(1,1,1)");
  EXPECT_EQ(fold(ones)[0].to_int64(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(shape(add("ConstantOfShape", {ints({})})), "()");
  EXPECT_EQ(shape(add("ConstantOfShape", {input(DType::Int64, Shape::of({2}))})), "(?,?)");
  expect_error("ConstantOfShape", {ints({2, -1})}, {}, 13, "negative size");
  Tensor r = fold_op("ConstantOfShape", {ints({2, 2})}, {{"value", floats({1}, {0.5f})}});
  EXPECT_EQ(float_values(r), (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
}

TEST_F(ShapeOps, RangeLengthsAndValues) {
  NodeId r = add("Range", {scalar(3), scalar(9), scalar(3)}, {}, 11);
  EXPECT_EQ(shape(r), "(2)");
  EXPECT_EQ(known(r), "(3,6)");
  EXPECT_EQ(fold(r)[0].to_int64(), (std::vector<int64_t>{3, 6}));
  Tensor down =
      fold_op("Range", {constant(int32s({}, {10})), constant(int32s({}, {4})), constant(int32s({}, {-3}))}, {}, 11);
  EXPECT_EQ(down.dtype(), DType::Int32);
  EXPECT_EQ(down.to_int64(), (std::vector<int64_t>{10, 7}));
  Tensor f =
      fold_op("Range", {constant(floats({}, {1})), constant(floats({}, {5})), constant(floats({}, {2}))}, {}, 11);
  EXPECT_EQ(float_values(f), (std::vector<float>{1, 3}));

  NodeId length = add("Gather", {out_id(add("Shape", {input(Shape({N, 8}))})), scalar(0)});
  EXPECT_EQ(shape(add("Range", {scalar(0), out_id(length), scalar(1)}, {}, 11)), "(N)");
  EXPECT_EQ(shape(add("Range", {scalar(0), input(DType::Int64, Shape()), scalar(1)}, {}, 11)), "(?)");
  expect_error("Range", {scalar(0), scalar(4), scalar(0)}, {}, 11, "delta must be non-zero");
  expect_error("Range", {scalar(0), constant(int32s({}, {4})), scalar(1)}, {}, 11, "input 1 has dtype int32");
}

// --- Pad ----------------------------------------------------------------------------------------

TEST_F(ShapeOps, PadAttributesBeforeOpset11InputsFrom11) {
  ValueId x = input(Shape({N, 3, 4, 4}));
  EXPECT_EQ(shape(add("Pad", {x}, {{"pads", std::vector<int64_t>{0, 0, 1, 2, 0, 0, 1, 2}}}, 2)), "(N,3,6,8)");
  EXPECT_EQ(shape(add("Pad", {x, ints({0, 0, 1, 2, 0, 0, 1, 2})}, {}, 11)), "(N,3,6,8)");
  EXPECT_EQ(shape(add("Pad", {x, ints({1, 1, 1, 1}), ValueId{}, ints({2, -1})}, {}, 18)), "(N,3,6,6)");
  EXPECT_EQ(shape(add("Pad", {x, ints({1, 0, 0, 0, 0, 0, 0, 0})}, {}, 11)), "(?,3,4,4)");
  EXPECT_EQ(shape(add("Pad", {x, input(DType::Int64, Shape::of({8}))}, {}, 11)), "(?,?,?,?)");

  expect_error("Pad", {x, ints({1, 1})}, {}, 11, "pads (1,1) has 2 entries, expected 8");
  expect_error("Pad", {x, ints({0, 0, -3, 0, 0, 0, -3, 0})}, {}, 11, "below zero");
  expect_error("Pad", {x, ints({0, 0, 0, 0, 0, 0, 0, 0})}, {{"mode", std::string("mirror")}}, 11,
               "unknown mode 'mirror'");
  expect_error("Pad", {x}, {}, 11, "the pads input is required");
  expect_error("Pad", {x, ints({0, 0, 0, 0, 0, 0, 0, 0}), constant(Tensor::scalar_int64(0))}, {}, 11,
               "constant_value has dtype int64");
}

TEST_F(ShapeOps, PadFoldsEveryMode) {
  ValueId data = constant(floats({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f}));
  // The ONNX spec's examples.
  Tensor c = fold_op("Pad", {data, ints({0, 2, 0, 0}), constant(floats({}, {0}))}, {}, 11);
  EXPECT_EQ(float_values(c), (std::vector<float>{0, 0, 1.0f, 1.2f, 0, 0, 2.3f, 3.4f, 0, 0, 4.5f, 5.7f}));
  Tensor r = fold_op("Pad", {data, ints({0, 2, 0, 0})}, {{"mode", std::string("reflect")}}, 11);
  EXPECT_EQ(float_values(r),
            (std::vector<float>{1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f}));
  Tensor e = fold_op("Pad", {data, ints({0, 2, 0, 0})}, {{"mode", std::string("edge")}}, 11);
  EXPECT_EQ(float_values(e),
            (std::vector<float>{1.0f, 1.0f, 1.0f, 1.2f, 2.3f, 2.3f, 2.3f, 3.4f, 4.5f, 4.5f, 4.5f, 5.7f}));
  Tensor w = fold_op("Pad", {data, ints({0, 1, 0, 1})}, {{"mode", std::string("wrap")}}, 19);
  EXPECT_EQ(float_values(w),
            (std::vector<float>{1.2f, 1.0f, 1.2f, 1.0f, 3.4f, 2.3f, 3.4f, 2.3f, 5.7f, 4.5f, 5.7f, 4.5f}));
  Tensor a = fold_op("Pad", {data}, {{"pads", std::vector<int64_t>{1, 0, -1, 0}}, {"value", 9.0}}, 2);
  EXPECT_EQ(float_values(a), (std::vector<float>{9, 9, 1.0f, 1.2f, 2.3f, 3.4f}));
  Tensor axes = fold_op("Pad", {data, ints({1, 0}), constant(floats({}, {7})), ints({-1})}, {}, 18);
  EXPECT_EQ(float_values(axes), (std::vector<float>{7, 1.0f, 1.2f, 7, 2.3f, 3.4f, 7, 4.5f, 5.7f}));
}

// --- Where, comparisons, logic ------------------------------------------------------------------

TEST_F(ShapeOps, ComparisonsBroadcastToBool) {
  NodeId less = add("Less", {input(Shape({N, 1, 4})), input(Shape::of({3, 1}))});
  EXPECT_EQ(out(less).dtype, DType::Bool);
  EXPECT_EQ(shape(less), "(N,3,4)");
  expect_error("Greater", {input(Shape::of({2, 3})), input(Shape::of({4, 3}))}, {}, 13, "cannot broadcast");
  expect_error("Equal", {input(Shape::of({2})), input(DType::Int64, Shape::of({2}))}, {}, 13,
               "input 1 has dtype int64");
  expect_error("And", {input(Shape::of({2})), input(Shape::of({2}))}, {}, 13, "input 0 must be bool");

  ValueId a = constant(floats({3}, {1, 2, 3}));
  ValueId b = constant(floats({1}, {2}));
  EXPECT_EQ(fold_op("Less", {a, b}).to_int64(), (std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(fold_op("LessOrEqual", {a, b}).to_int64(), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(fold_op("Greater", {a, b}).to_int64(), (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(fold_op("GreaterOrEqual", {a, b}).to_int64(), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(fold_op("Equal", {ints({5, -1}), ints({-1})}).to_int64(), (std::vector<int64_t>{0, 1}));

  ValueId p = constant(bools({4}, {true, true, false, false}));
  ValueId q = constant(bools({4}, {true, false, true, false}));
  EXPECT_EQ(fold_op("And", {p, q}).to_int64(), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(fold_op("Or", {p, q}).to_int64(), (std::vector<int64_t>{1, 1, 1, 0}));
  EXPECT_EQ(fold_op("Xor", {p, q}).to_int64(), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(fold_op("Not", {p}).to_int64(), (std::vector<int64_t>{0, 0, 1, 1}));
}

TEST_F(ShapeOps, EqualAndWhereOfKnownShapeVectors) {
  // PyTorch's expand export: Where(Equal(shape, -1), ones, shape).
  ValueId target = out_id(
      add("Concat", {out_id(add("Gather", {out_id(add("Shape", {input(Shape({N, 3}))})), ints({0})})), ints({-1, 4})},
          {{"axis", int64_t{0}}}));
  NodeId is_minus_one = add("Equal", {target, ints({-1})});
  EXPECT_EQ(known(is_minus_one), "(0,1,0)");
  NodeId fixed = add("Where", {out_id(is_minus_one), ints({1, 1, 1}), target});
  EXPECT_EQ(out(fixed).dtype, DType::Int64);
  EXPECT_EQ(known(fixed), "(N,1,4)");
  EXPECT_EQ(known(add("Equal", {target, ints({2, 3, 4})})), "none");  // N == 2 depends on N

  NodeId w = add("Where", {input(DType::Bool, Shape({N, 1})), input(Shape::of({1, 5})), input(Shape::of({5}))});
  EXPECT_EQ(shape(w), "(N,5)");
  expect_error("Where", {input(Shape::of({2})), input(Shape::of({2})), input(Shape::of({2}))}, {}, 16,
               "input 0 must be bool");
  Tensor r = fold_op(
      "Where", {constant(bools({2, 1}, {true, false})), constant(floats({2}, {1, 2})), constant(floats({}, {9}))});
  EXPECT_EQ(float_values(r), (std::vector<float>{1, 2, 9, 9}));
}

// --- costs and robustness -----------------------------------------------------------------------

TEST_F(ShapeOps, CostsDataMovementIsFreeComparisonsOnePerElement) {
  ValueId x = input(Shape({N, 16, 7, 7}));
  NodeId reshape = add("Reshape", {x, ints({-1, 784})});
  OpCost c = node_cost(g, reshape, *OpRegistry::builtin().find("", "Reshape"), {{"N", 8}});
  EXPECT_EQ(c.forward_flops, 0);
  EXPECT_EQ(c.backward_flops, 0);
  NodeId where = add("Where", {input(DType::Bool, Shape({N, 1})), x, x});
  OpCost w = node_cost(g, where, *OpRegistry::builtin().find("", "Where"), {{"N", 8}});
  EXPECT_EQ(w.forward_flops, 8 * 784);
  EXPECT_EQ(w.backward_flops, 0);
}

TEST_F(ShapeOps, InputKindsMarkShapesAndIndicesNonDifferentiable) {
  const OpRegistry& r = OpRegistry::builtin();
  EXPECT_EQ(r.find("", "Gather")->input_kind(0), InputKind::Data);
  EXPECT_EQ(r.find("", "Gather")->input_kind(1), InputKind::NonDifferentiable);
  EXPECT_EQ(r.find("", "Reshape")->input_kind(1), InputKind::NonDifferentiable);
  EXPECT_EQ(r.find("", "Concat")->input_kind(3), InputKind::Data);
  EXPECT_EQ(r.find("", "Where")->input_kind(0), InputKind::NonDifferentiable);
  EXPECT_EQ(r.find("", "Where")->input_kind(2), InputKind::Data);
  EXPECT_EQ(r.find("", "Pad")->input_kind(1), InputKind::NonDifferentiable);
}

TEST_F(ShapeOps, UnknownRankInputsGiveUnknownShapesWithoutCrashing) {
  auto any = [&](DType dtype = DType::Float32) { return input(dtype, Shape::unknown_rank()); };
  ValueId i64 = any(DType::Int64);
  std::vector<std::pair<std::string, std::vector<ValueId>>> cases = {
      {"Shape", {any()}},
      {"Size", {any()}},
      {"Gather", {any(), i64}},
      {"Unsqueeze", {any(), i64}},
      {"Squeeze", {any(), i64}},
      {"Concat", {any(), any()}},
      {"Reshape", {any(), i64}},
      {"Flatten", {any()}},
      {"Slice", {any(), i64, i64, i64, i64}},
      {"Transpose", {any()}},
      {"Expand", {any(), i64}},
      {"Tile", {any(), i64}},
      {"Cast", {any()}},
      {"CastLike", {any(), any()}},
      {"Identity", {any()}},
      {"ConstantOfShape", {i64}},
      {"Range", {i64, i64, i64}},
      {"Pad", {any(), i64, ValueId{}, i64}},
      {"Where", {any(DType::Bool), any(), any()}},
      {"Equal", {any(), any()}},
      {"Not", {any(DType::Bool)}},
      {"Xor", {any(DType::Bool), any(DType::Bool)}},
  };
  for (const auto& [op, inputs] : cases) {
    Attributes attrs;
    if (op == "Concat") attrs["axis"] = int64_t{0};
    if (op == "Cast") attrs["to"] = int64_t{1};
    NodeId n = add(op, inputs, attrs, 18, 1);
    EXPECT_NE(out(n).dtype, DType::Undefined) << op;
  }
  NodeId split = add("Split", {any(), i64}, {}, 18, 2);
  EXPECT_EQ(shape(split, 1), "(?)");
}

}  // namespace
