// Autodiff, the rule side: a gradient rule is a plain function that, given one forward node and the
// gradients flowing into its outputs, emits backward nodes into the training graph and hands each
// differentiable input its gradient. Rules live one per file in graph/autodiff/rules/ and are listed in
// the one explicit table graph/autodiff/rules/registry.cc. Backward ops that ONNX lacks (ConvGrad,
// ActivationGrad, ...) are in onnxtrain's own domain, kTrainingDomain, with schemas in
// graph/ops/training/ and kernels like every other op.
//
//   void relu_gradient(GradientContext& ctx) {
//     ValueId dx = ctx.emit_training("ActivationGrad", {ctx.output_grad(0), ctx.input(0)},
//                                    {{"activation", std::string("Relu")}});
//     ctx.add_input_grad(0, dx);
//   }
//
// The context does the bookkeeping every rule needs: a value used k times receives k contributions
// that are summed once, integer and shape tensors never receive a gradient, and broadcasting inputs get
// their gradient summed back to their own shape (add_broadcast_input_grad).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_schema.h"

namespace onnxtrain {

// The ai.onnx opset of the nodes that rules emit (ReduceSum and Squeeze take axes as inputs from 13).
inline constexpr int kBackwardOnnxOpset = 17;

class TrainingGraphBuilder;

class GradientContext {
 public:
  GradientContext(TrainingGraphBuilder& builder, NodeId node);

  const Graph& graph() const;
  // A copy of the forward node: stays valid while the rule emits nodes (which may move the graph's).
  const Node& node() const { return node_; }
  NodeId node_id() const { return node_id_; }
  bool has_input(size_t i) const { return node().has_input(i); }
  ValueId input(size_t i) const { return node().inputs.at(i); }
  ValueId output(size_t i) const { return node().outputs.at(i); }
  const Value& value(ValueId id) const { return graph().value(id); }
  const Shape& shape(ValueId id) const { return value(id).shape; }
  DType dtype(ValueId id) const { return value(id).dtype; }

  // Whether the loss needs the gradient of input i (a float input of a differentiable kind that depends
  // on a trained value). Rules skip the work for inputs that do not.
  bool needs_grad(size_t i) const;
  // The summed gradient flowing into output i; invalid when the loss does not depend on that output.
  ValueId output_grad(size_t i);
  // The gradient flowing into output i as two parts when two contributions reach it, for a rule that adds
  // them in its own pass; else {output_grad(i)}.
  std::vector<ValueId> output_grad_parts(size_t i);
  // output_grad(i), or zeros shaped like output i when no gradient reached it.
  ValueId output_grad_or_zeros(size_t i);
  // Contributes `grad` (shaped like input i) to input i's gradient; ignored when !needs_grad(i).
  void add_input_grad(size_t i, ValueId grad);
  // The same for an input that was broadcast: `grad` has the broadcast shape and is first summed over
  // the broadcast axes down to input i's shape.
  void add_broadcast_input_grad(size_t i, ValueId grad);
  // Forward output i of the node, added when the model omitted it (Dropout's mask, the loss's log_prob).
  ValueId require_output(size_t i);

  // Emits a backward node and returns its outputs, shape-inferred. `outputs` may mark unwanted optional
  // outputs with false; their ids come back invalid.
  std::vector<ValueId> emit(const std::string& op_type, std::vector<ValueId> inputs, Attributes attributes,
                            std::vector<bool> outputs, const std::string& domain = "");
  // One-output forms for ai.onnx ops and for onnxtrain's backward ops.
  ValueId emit(const std::string& op_type, std::vector<ValueId> inputs, Attributes attributes = {});
  ValueId emit_training(const std::string& op_type, std::vector<ValueId> inputs, Attributes attributes = {});

  // Constants added to the graph (role Constant).
  ValueId constant(Tensor tensor);
  ValueId int64s(const std::vector<int64_t>& values);  // a 1-D int64 constant (axes, shapes, pads)
  ValueId scalar(double value, DType dtype);           // a 0-D float constant
  // A 1-D int64 tensor holding `v`'s shape: a constant when static, else a Shape node.
  ValueId shape_of(ValueId v);
  // Sums `grad` over the axes along which `like` was broadcast to grad's shape (numpy rules); `grad`
  // itself when no axis was broadcast. Throws Error at the node when the axes cannot be decided.
  ValueId reduce_to_shape_of(ValueId grad, ValueId like);

  // Throws Error at the node: "<Op> gradient: <message>".
  [[noreturn]] void fail(const std::string& message) const;

 private:
  TrainingGraphBuilder& builder_;
  NodeId node_id_;
  Node node_;
};

using GradientRule = void (*)(GradientContext&);

class GradientRegistry {
 public:
  void add(const std::string& domain, const std::string& op_type, GradientRule rule);
  GradientRule find(const std::string& domain, const std::string& op_type) const;  // nullptr: none
  std::vector<std::pair<std::string, std::string>> ops() const;                    // (domain, op) pairs

  // Every rule onnxtrain has (graph/autodiff/rules/registry.cc).
  static const GradientRegistry& builtin();

 private:
  std::map<std::pair<std::string, std::string>, GradientRule> rules_;
};

}  // namespace onnxtrain
