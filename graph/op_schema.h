// Op schemas: what onnxtrain knows about each op it supports. One file per op family under graph/ops/
// defines schemas and registers them in graph/ops/registry.cc (one line per family). A schema gives
//  - the kind of each input (data, weight, state, non-differentiable), which decides what is trainable;
//  - shape inference, with symbolic dims and "known" element values of small int tensors (the
//    Shape → Gather → Concat → Reshape chains exporters emit), for every opset from 7 to 21;
//  - the cost (forward and backward FLOPs) for `inspect` and the partitioner;
//  - optionally a constant evaluator, which constant folding uses when every input is a constant.
//
//   const OpSchema* conv = OpRegistry::builtin().find("", "Conv");
//   infer_node(graph, node_id, *conv);   // sets output dtypes/shapes or throws Error at the node
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace onnxtrain {

// onnxtrain's own domain: the backward ops that ONNX lacks (ConvGrad, ActivationGrad, ...).
inline constexpr const char* kTrainingDomain = "ai.onnxtrain";

// ONNX ops whose output is their input's bytes under new sizes: the CPU kernels copy them with one memcpy
// (kernels/cpu/reshape_copy.cc), and a session hands the input's buffer on instead where it may
// (InferenceSession::views_input_of).
inline constexpr const char* kReshapeOps[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};

// A node of kReshapeOps with a data input and one output: what may run as a view of its input, where the
// input is not a weight and neither value must keep its own buffer (the caller's input, a graph output).
inline bool is_reshape_of_input(const Node& node) {
  return node.domain.empty() && std::ranges::find(kReshapeOps, node.op_type) != std::end(kReshapeOps) &&
         !node.inputs.empty() && node.inputs[0].valid() && node.outputs.size() == 1 && node.outputs[0].valid();
}

enum class InputKind {
  Data,               // differentiable activation (a float initializer with more than one element here is a parameter)
  Weight,             // weight/bias slot: a float initializer here is a trainable parameter
  State,              // BatchNorm running mean/var: state, updated in training mode, never trained
  NonDifferentiable,  // shapes, indices, axes, masks, scalars like ratio or training_mode
};

// What shape inference sees of one node. Inputs that were omitted report has_input() == false.
class InferContext {
 public:
  InferContext(Graph& graph, NodeId node) : graph_(graph), node_id_(node) {}

  const Node& node() const { return graph_.node(node_id_); }
  int opset() const { return node().opset; }
  size_t input_count() const { return node().inputs.size(); }
  size_t output_count() const { return node().outputs.size(); }
  bool has_input(size_t i) const { return node().has_input(i); }
  bool has_output(size_t i) const { return i < node().outputs.size() && node().outputs[i].valid(); }
  const Value& input(size_t i) const;
  const Shape& input_shape(size_t i) const { return input(i).shape; }
  DType input_dtype(size_t i) const { return input(i).dtype; }
  // The input's data when it is a constant, buffer or folded value (never a parameter, state or input).
  const Tensor* input_constant(size_t i) const;
  // Element values of a small 1-D/0-D int input (constant, or derived from shapes with symbols).
  std::optional<std::vector<Dim>> input_known(size_t i) const;
  // Static int64 values of an input (an axes/shape/pads input); nullopt when not known statically.
  std::optional<std::vector<int64_t>> input_ints(size_t i) const;

  void set_output(size_t i, DType dtype, Shape shape);
  void set_output_known(size_t i, std::vector<Dim> values);  // for int outputs that carry shapes

  // Throws Error naming this node.
  [[noreturn]] void fail(const std::string& message) const;

 private:
  Graph& graph_;
  NodeId node_id_;
};

// Shapes of one node with the batch symbol bound (static where the model allows).
struct CostContext {
  const Node& node;
  std::vector<Shape> inputs;  // empty Shape::unknown_rank() for omitted inputs
  std::vector<Shape> outputs;
  int64_t input_numel(size_t i) const;   // 0 when unknown
  int64_t output_numel(size_t i) const;  // 0 when unknown
};

struct OpCost {
  double forward_flops = 0;
  double backward_flops = 0;
  // Steps the op runs one after another within itself, each paying the device's fixed cost per step
  // (DeviceDescription::step_overhead_s) beyond its FLOPs: a recurrent op's time steps, every direction.
  double serial_steps = 0;
};

// Constant folding of one node: every input is a constant tensor (omitted inputs are empty tensors).
struct FoldContext {
  const Node& node;
  std::vector<Tensor> inputs;
  std::vector<Shape> output_shapes;  // from shape inference
  bool has_input(size_t i) const { return i < inputs.size() && !inputs[i].empty(); }
  // Input i's values as int64 (an integer or bool tensor); an Error naming the node for any other type: a
  // model can feed a float constant where the op takes sizes or indices.
  std::vector<int64_t> input_ints(size_t i) const;
};

struct OpSchema {
  std::string op_type;
  std::string domain;  // "" = ai.onnx
  int min_inputs = 1;
  int max_inputs = 1;  // -1: variadic
  int min_outputs = 1;
  int max_outputs = 1;
  std::vector<InputKind> input_kinds;  // the last entry repeats for variadic inputs
  void (*infer)(InferContext&) = nullptr;
  OpCost (*cost)(const CostContext&) = nullptr;  // nullptr: one FLOP per output element, twice in backward
  // Constant evaluator; nullptr: never folded. Returns one tensor per output, or nothing to decline.
  std::vector<Tensor> (*fold)(const FoldContext&) = nullptr;
  // Inputs the op reads only for their dtype (CastLike's second): folding does not need them constant
  // and sees an empty tensor of that dtype.
  std::vector<size_t> type_only_inputs;

  InputKind input_kind(size_t i) const;
};

class OpRegistry {
 public:
  void add(OpSchema schema);  // a second schema for the same (domain, op) is an internal error
  const OpSchema* find(const std::string& domain, const std::string& op_type) const;
  std::vector<const OpSchema*> all() const;

  // The schemas of every op onnxtrain supports (graph/ops/registry.cc).
  static const OpRegistry& builtin();

 private:
  std::map<std::pair<std::string, std::string>, OpSchema> schemas_;
};

// Runs the schema's shape inference on one node (checks input/output counts first).
void infer_node(Graph& graph, NodeId node, const OpSchema& schema);

// Cost of one node with symbols bound (the batch size); unknown sizes count as zero.
OpCost node_cost(const Graph& graph, NodeId node, const OpSchema& schema, const SymbolBindings& bindings);

}  // namespace onnxtrain
