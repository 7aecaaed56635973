// Graphs built by hand in tests, one node at a time with the op schemas inferring the output shapes.
//
//   Graph g;
//   ValueId w = add_parameter(g, "W", Tensor(DType::Float32, {8, 16}));
//   ValueId y = add_inferred_node(g, "mm", "MatMul", {x, w}, "mm_out");
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "graph/op_schema.h"

namespace onnxtrain::testing_support {

// A default-domain, opset-17 node `name` with one output `output`; shapes inferred (throws Error).
inline ValueId add_inferred_node(Graph& g, const std::string& name, const std::string& op, std::vector<ValueId> inputs,
                                 const std::string& output, Attributes attributes = {}) {
  ValueId y = g.add_value({.name = output});
  NodeId n = g.add_node({.name = name,
                         .op_type = op,
                         .opset = 17,
                         .inputs = std::move(inputs),
                         .outputs = {y},
                         .attributes = std::move(attributes)});
  infer_node(g, n, *OpRegistry::builtin().find("", op));
  return y;
}

// A float32 graph input of `sizes`.
inline ValueId add_input(Graph& g, const std::string& name, const std::vector<int64_t>& sizes) {
  const ValueId v =
      g.add_value({.name = name, .dtype = DType::Float32, .shape = Shape::of(sizes), .role = ValueRole::Input});
  g.inputs.push_back(v);
  return v;
}

// An initializer of `role` holding `value`.
inline ValueId add_initializer(Graph& g, const std::string& name, const Tensor& value, ValueRole role) {
  const ValueId id = g.add_value(
      {.name = name, .dtype = value.dtype(), .shape = Shape::of(value.sizes()), .role = role, .data = value});
  g.initializers.push_back(id);
  return id;
}

// A float trainable initializer holding `value`.
inline ValueId add_parameter(Graph& g, const std::string& name, const Tensor& value) {
  return add_initializer(g, name, value, ValueRole::Parameter);
}

// A constant initializer holding `value` (what an exporter's Constant node becomes), never trained.
inline ValueId add_constant(Graph& g, const std::string& name, const Tensor& value) {
  return add_initializer(g, name, value, ValueRole::Constant);
}

// A float32 scalar constant, never trained.
inline ValueId add_scalar(Graph& g, const std::string& name, float value) {
  Tensor t(DType::Float32, {});
  t.data<float>()[0] = value;
  return add_constant(g, name, t);
}

// A float32 tensor of `sizes` uniform in [-0.5, 0.5), the same for the same seed.
inline Tensor uniform_tensor(const std::vector<int64_t>& sizes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  Tensor t(DType::Float32, sizes);
  for (float& v : t.data<float>()) v = dist(rng);
  return t;
}

// A 2-D Conv's attributes: the same stride and pad on both axes.
// How many nodes of `g` run `op` (any domain).
inline size_t count_op(const Graph& g, const std::string& op) {
  return static_cast<size_t>(
      std::count_if(g.order().begin(), g.order().end(), [&](NodeId id) { return g.node(id).op_type == op; }));
}

inline Attributes conv2d_attributes(int64_t stride, int64_t pad, int64_t group = 1) {
  return {{"strides", std::vector<int64_t>{stride, stride}},
          {"pads", std::vector<int64_t>{pad, pad, pad, pad}},
          {"group", group}};
}

}  // namespace onnxtrain::testing_support
