#include <gtest/gtest.h>

#include "graph/graph.h"
#include "graph/op_schema.h"

using namespace onnxtrain;

TEST(Shape, SymbolicArithmetic) {
  Dim n = Dim::symbol("N");
  EXPECT_EQ((n * Dim(4)).to_string(), "4*N");
  EXPECT_EQ((n * Dim(4)).divide_exact(Dim(2)).to_string(), "2*N");
  EXPECT_TRUE((n * Dim(3)).divide_exact(Dim(2)).is_unknown());
  EXPECT_EQ(*Shape({n, Dim(3)}).numel({{"N", 5}}), 15);
  EXPECT_FALSE(Shape({n, Dim(3)}).numel().has_value());
  EXPECT_EQ(Shape({n, Dim(1), Dim(28)}).to_string(), "(N,1,28)");
  EXPECT_NE(Dim::unknown(), Dim::unknown());
}

TEST(Tensor, WrapsStorageItDoesNotOwn) {
  static std::byte buffer[24];
  int released = 0;
  {
    Tensor t = Tensor::wrap(DType::Float32, {2, 3}, std::shared_ptr<std::byte>(buffer, [&](std::byte*) { ++released; }));
    EXPECT_EQ(t.raw(), buffer);
    EXPECT_EQ(t.nbytes(), 24u);
    t.data<float>()[5] = 2.5f;
    Tensor copy = t;  // shares the storage
    const Tensor deep = t.clone();
    EXPECT_NE(deep.raw(), buffer) << "clone owns its memory";
    EXPECT_EQ(deep.data<float>()[5], 2.5f);
    t = Tensor();
    EXPECT_EQ(released, 0) << "a copy still holds it";
  }
  EXPECT_EQ(released, 1);
  EXPECT_EQ(Tensor(DType::Int64, {0}).nbytes(), 0u);
  EXPECT_EQ(Tensor(DType::Int64, {4}).data<int64_t>()[3], 0) << "zero-filled";
}

TEST(Shape, Broadcast) {
  auto s = broadcast_shapes(Shape({Dim::symbol("N"), Dim(1), Dim(5)}), Shape::of({3, 1}));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->to_string(), "(N,3,5)");
  EXPECT_FALSE(broadcast_shapes(Shape::of({2, 3}), Shape::of({4, 3})));
}

// Both sorts name a node on the cycle.
TEST(Graph, SortDetectsCycle) {
  for (void (Graph::*sort)() : {&Graph::sort, &Graph::sort_depth_first}) {
    Graph g;
    ValueId a = g.add_value({.name = "a", .dtype = DType::Float32});
    ValueId b = g.add_value({.name = "b", .dtype = DType::Float32});
    g.add_node({.name = "n1", .op_type = "Relu", .inputs = {b}, .outputs = {a}});
    g.add_node({.name = "n2", .op_type = "Relu", .inputs = {a}, .outputs = {b}});
    try {
      (g.*sort)();
      FAIL() << "a cycle was not detected";
    } catch (const Error& e) {
      EXPECT_TRUE(e.has_node());
      EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos);
    }
  }
}

TEST(Graph, SortOrdersProducersFirst) {
  Graph g;
  ValueId x = g.add_value({.name = "x", .dtype = DType::Float32});
  ValueId a = g.add_value({.name = "a", .dtype = DType::Float32});
  ValueId b = g.add_value({.name = "b", .dtype = DType::Float32});
  NodeId second = g.add_node({.name = "second", .op_type = "Relu", .inputs = {a}, .outputs = {b}});
  NodeId first = g.add_node({.name = "first", .op_type = "Relu", .inputs = {x}, .outputs = {a}});
  g.sort();
  ASSERT_EQ(g.order().size(), 2u);
  EXPECT_EQ(g.order()[0], first);
  EXPECT_EQ(g.order()[1], second);
}

// A chain x -> r1 -> r2 -> r3 with a weight cast appended after it and read by r3: Kahn's sort() puts the
// Cast (no producer) first; sort_depth_first() puts it right before r3 and leaves the rest in place.
TEST(Graph, SortDepthFirstPutsAnAppendedProducerBesideItsConsumer) {
  Graph g;
  auto value = [&](const std::string& name) { return g.add_value({.name = name, .dtype = DType::Float32}); };
  const ValueId x = value("x"), a = value("a"), b = value("b"), w = value("w"), wh = value("w_half"), y = value("y");
  const NodeId r1 = g.add_node({.name = "r1", .op_type = "Relu", .inputs = {x}, .outputs = {a}});
  const NodeId r2 = g.add_node({.name = "r2", .op_type = "Relu", .inputs = {a}, .outputs = {b}});
  const NodeId r3 = g.add_node({.name = "r3", .op_type = "Add", .inputs = {b, wh}, .outputs = {y}});
  const NodeId cast = g.add_node({.name = "cast", .op_type = "Cast", .inputs = {w}, .outputs = {wh}});
  Graph kahn = g;
  kahn.sort();
  EXPECT_EQ(kahn.order(), (std::vector<NodeId>{r1, cast, r2, r3})) << "every node without a producer goes first";
  g.sort_depth_first();
  EXPECT_EQ(g.order(), (std::vector<NodeId>{r1, r2, cast, r3}));
  g.sort_depth_first();
  EXPECT_EQ(g.order(), (std::vector<NodeId>{r1, r2, cast, r3})) << "a sorted order stays as it is";
}

TEST(Shape, NumpySlice) {
  // Python: list(range(10))[2:8:3] → [2, 5]; [-3:] → 3 elements from 7; [8:2:-2] → [8, 6, 4]; [::-1] → 10.
  EXPECT_EQ(numpy_slice(2, 8, 3, 10).first, 2);
  EXPECT_EQ(numpy_slice(2, 8, 3, 10).count, 2);
  EXPECT_EQ(numpy_slice(-3, INT64_MAX, 1, 10).first, 7);
  EXPECT_EQ(numpy_slice(-3, INT64_MAX, 1, 10).count, 3);
  EXPECT_EQ(numpy_slice(8, 2, -2, 10).first, 8);
  EXPECT_EQ(numpy_slice(8, 2, -2, 10).count, 3);
  EXPECT_EQ(numpy_slice(-1, INT64_MIN, -1, 10).count, 10);
  EXPECT_EQ(numpy_slice(5, 2, 1, 10).count, 0);
  EXPECT_EQ(numpy_slice(0, 5, 1, 0).count, 0);
}
