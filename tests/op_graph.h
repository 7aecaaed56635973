// The hand-built one-node graphs of the op-schema tests (math_ops_test, nn_ops_test): a node under test,
// its inference, cost, folding and the error it raises.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_schema.h"
#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"

namespace onnxtrain::testing_support {

inline const Dim N = Dim::symbol("N");

inline Shape nchw(int64_t c, int64_t h, int64_t w) { return Shape({N, Dim(c), Dim(h), Dim(w)}); }

inline Tensor floats(std::vector<int64_t> sizes, const std::vector<float>& values) {
  return op_helpers::tensor_from(DType::Float32, std::move(sizes), values);
}

// A hand-built graph with one node under test at a time.
struct OpGraph {
  Graph g;
  int opset = 17;

  ValueId input(DType dtype, Shape shape) {
    ValueId v = g.add_value({.name = "in" + std::to_string(g.value_count()),
                             .dtype = dtype,
                             .shape = std::move(shape),
                             .role = ValueRole::Input});
    g.inputs.push_back(v);
    return v;
  }
  ValueId constant(Tensor t) {
    Shape shape = Shape::of(t.sizes());
    DType dtype = t.dtype();
    return g.add_value({.name = "c" + std::to_string(g.value_count()),
                        .dtype = dtype,
                        .shape = shape,
                        .role = ValueRole::Constant,
                        .data = std::move(t)});
  }
  // An int64 value whose element values are known symbolically (as after Gather(Shape(x), 0)).
  ValueId known(Shape shape, std::vector<Dim> values) {
    return g.add_value({.name = "k" + std::to_string(g.value_count()),
                        .dtype = DType::Int64,
                        .shape = std::move(shape),
                        .known = std::move(values)});
  }
  NodeId node(const std::string& op, std::vector<ValueId> inputs, size_t outputs = 1,
              std::map<std::string, Attribute> attributes = {}) {
    std::vector<ValueId> outs;
    for (size_t i = 0; i < outputs; ++i) outs.push_back(g.add_value({.name = op + "_out" + std::to_string(i)}));
    return g.add_node({.name = op + "_node",
                       .op_type = op,
                       .opset = opset,
                       .inputs = std::move(inputs),
                       .outputs = std::move(outs),
                       .attributes = std::move(attributes)});
  }
  static const OpSchema& schema(const std::string& op) {
    const OpSchema* s = OpRegistry::builtin().find("", op);
    EXPECT_NE(s, nullptr) << op;
    return *s;
  }
  void infer(NodeId n) { infer_node(g, n, schema(g.node(n).op_type)); }
  const Value& out(NodeId n, size_t i = 0) { return g.value(g.node(n).outputs[i]); }
  std::string shape(NodeId n, size_t i = 0) { return out(n, i).shape.to_string(); }
  // Infers and returns the error message; fails the test when nothing is thrown or the node is not named.
  std::string error(NodeId n) {
    try {
      infer(n);
    } catch (const Error& e) {
      EXPECT_TRUE(e.has_node());
      EXPECT_EQ(e.node(), g.node(n).name);
      return e.message();
    }
    ADD_FAILURE() << "no error for " << g.node(n).op_type;
    return "";
  }
  OpCost cost(NodeId n, int64_t batch = 2) { return node_cost(g, n, schema(g.node(n).op_type), {{"N", batch}}); }
  std::vector<Tensor> fold(NodeId n) {
    FoldContext ctx{g.node(n), {}, {}};
    for (ValueId in : g.node(n).inputs) ctx.inputs.push_back(in.valid() ? *g.value(in).data : Tensor());
    return schema(g.node(n).op_type).fold(ctx);
  }
};

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace onnxtrain::testing_support
