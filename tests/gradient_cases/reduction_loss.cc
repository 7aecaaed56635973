// Harness cases of the reductions (every Reduce* op with attribute axes at opset 13 and input axes at
// opset 18, keepdims 0/1, negative axes, reduce-all, noop) and the losses (SoftmaxCrossEntropyLoss and
// NegativeLogLikelihoodLoss: reductions, class weights, ignore_index among the labels, 2-D to 4-D, int32).
#include "tests/gradient_harness.h"

namespace onnxtrain::harness {

namespace {

// Inputs away from each op's kinks: distinct for Max/Min, away from zero for Prod and L1, positive for
// LogSum (its log needs a positive sum).
HarnessInput reduce_input(const std::string& op, std::vector<int64_t> sizes) {
  if (op == "ReduceMax" || op == "ReduceMin") return distinct(std::move(sizes));
  if (op == "ReduceProd" || op == "ReduceL1") return away_from_zero(std::move(sizes));
  if (op == "ReduceLogSum") return positive(std::move(sizes));
  return normal(std::move(sizes));
}

void add_reduce_cases(std::vector<GradientCase>& cases, const std::string& op) {
  const std::vector<int64_t> x = {2, 3, 4};
  // Opset 13: axes is an attribute (ReduceSum is the exception, see its own cases below).
  cases.push_back({.label = op + " opset13 axis 1 keepdims",
                   .op_type = op,
                   .attributes = {{"axes", std::vector<int64_t>{1}}},
                   .inputs = {reduce_input(op, x)},
                   .opset = 13});
  cases.push_back({.label = op + " opset13 axes -1 0 no keepdims",
                   .op_type = op,
                   .attributes = {{"axes", std::vector<int64_t>{-1, 0}}, {"keepdims", int64_t{0}}},
                   .inputs = {reduce_input(op, x)},
                   .opset = 13});
  cases.push_back({.label = op + " opset13 all no keepdims",
                   .op_type = op,
                   .attributes = {{"keepdims", int64_t{0}}},
                   .inputs = {reduce_input(op, {3, 2})},
                   .opset = 13});
  // Opset 18: axes is an input.
  cases.push_back({.label = op + " opset18 axis 1 no keepdims",
                   .op_type = op,
                   .attributes = {{"keepdims", int64_t{0}}},
                   .inputs = {reduce_input(op, x), int64s({1})},
                   .opset = 18});
  cases.push_back({.label = op + " opset18 axes 0 -1 keepdims",
                   .op_type = op,
                   .inputs = {reduce_input(op, x), int64s({0, -1})},
                   .opset = 18});
  cases.push_back({.label = op + " opset18 axis -2 of 4-D keepdims",
                   .op_type = op,
                   .inputs = {reduce_input(op, {2, 2, 3, 2}), int64s({-2})},
                   .opset = 18});
  cases.push_back(
      {.label = op + " opset18 all keepdims", .op_type = op, .inputs = {reduce_input(op, {3, 2})}, .opset = 18});
}

std::vector<double> labels(std::initializer_list<double> v) { return v; }

}  // namespace

std::vector<GradientCase> reduction_loss_gradient_cases() {
  std::vector<GradientCase> cases;
  cases.push_back(
      {.label = "ReduceSum axis 1 keepdims", .op_type = "ReduceSum", .inputs = {normal({2, 3, 4}), int64s({1})}});
  cases.push_back({.label = "ReduceSum axes -1 0 no keepdims",
                   .op_type = "ReduceSum",
                   .attributes = {{"keepdims", int64_t{0}}},
                   .inputs = {normal({2, 3, 4}), int64s({-1, 0})}});
  cases.push_back({.label = "ReduceSum all", .op_type = "ReduceSum", .inputs = {normal({3, 2})}});
  cases.push_back({.label = "ReduceSum opset11 attribute axes 0 2",
                   .op_type = "ReduceSum",
                   .attributes = {{"axes", std::vector<int64_t>{0, 2}}},
                   .inputs = {normal({2, 3, 4})},
                   .opset = 11});
  cases.push_back({.label = "ReduceSum opset13 all no keepdims",
                   .op_type = "ReduceSum",
                   .attributes = {{"keepdims", int64_t{0}}},
                   .inputs = {normal({3, 2})},
                   .opset = 13});
  for (const char* op : {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceLogSum",
                         "ReduceLogSumExp", "ReduceL1", "ReduceL2"}) {
    add_reduce_cases(cases, op);
  }
  // noop_with_empty_axes with no axes: the identity, dx = dy.
  cases.push_back({.label = "ReduceMean opset18 noop with empty axes",
                   .op_type = "ReduceMean",
                   .attributes = {{"noop_with_empty_axes", int64_t{1}}},
                   .inputs = {normal({2, 3})},
                   .opset = 18});
  cases.push_back({.label = "ReduceMax opset18 noop with empty axes input",
                   .op_type = "ReduceMax",
                   .attributes = {{"noop_with_empty_axes", int64_t{1}}},
                   .inputs = {distinct({2, 3}), values({}, {0})},
                   .opset = 18});

  // --- SoftmaxCrossEntropyLoss: scores (N,C[,d...]), labels (N[,d...]), optional weights (C) ---
  const auto sce = [&](std::string label, Attributes attributes, std::vector<HarnessInput> inputs, int outputs = 1) {
    cases.push_back({.label = std::move(label),
                     .op_type = "SoftmaxCrossEntropyLoss",
                     .attributes = std::move(attributes),
                     .inputs = std::move(inputs),
                     .outputs = outputs});
  };
  sce("SoftmaxCrossEntropyLoss 2-D mean", {}, {normal({3, 4}), values(labels({0, 3, 1}), {3})});
  sce("SoftmaxCrossEntropyLoss 2-D none", {{"reduction", std::string("none")}},
      {normal({4, 3}), values(labels({2, 0, 1, 2}), {4})});
  sce("SoftmaxCrossEntropyLoss 2-D sum weights", {{"reduction", std::string("sum")}},
      {normal({4, 5}), values(labels({4, 0, 2, 2}), {4}), constant(positive({5}))});
  sce("SoftmaxCrossEntropyLoss 2-D mean weights ignore_index", {{"ignore_index", int64_t{1}}},
      {normal({5, 3}), values(labels({1, 2, 1, 0, 2}), {5}), constant(positive({3}))});
  sce("SoftmaxCrossEntropyLoss 2-D mean ignore_index -100", {{"ignore_index", int64_t{-100}}},
      {normal({4, 3}), values(labels({-100, 2, 0, -100}), {4})});
  sce("SoftmaxCrossEntropyLoss 4-D mean int32 ignore_index", {{"ignore_index", int64_t{0}}},
      {normal({2, 3, 2, 2}), values(labels({0, 1, 2, 1, 2, 0, 0, 1}), {2, 2, 2}, DType::Int32)});
  sce("SoftmaxCrossEntropyLoss 4-D none weights int32", {{"reduction", std::string("none")}},
      {normal({2, 3, 2, 2}), values(labels({0, 1, 2, 1, 2, 0, 2, 1}), {2, 2, 2}, DType::Int32),
       constant(positive({3}))});
  sce("SoftmaxCrossEntropyLoss 3-D sum weights ignore_index",
      {{"reduction", std::string("sum")}, {"ignore_index", int64_t{2}}},
      {normal({2, 4, 3}), values(labels({2, 0, 3, 1, 2, 3}), {2, 3}), constant(positive({4}))});
  // log_prob in the loss too: its gradient flows back through the log-softmax.
  sce("SoftmaxCrossEntropyLoss 2-D mean with log_prob", {}, {normal({3, 4}), values(labels({1, 3, 0}), {3})}, 2);
  cases.push_back({.label = "SoftmaxCrossEntropyLoss 4-D log_prob only",
                   .op_type = "SoftmaxCrossEntropyLoss",
                   .inputs = {normal({2, 3, 2, 2}), values(labels({0, 1, 2, 1, 2, 0, 2, 1}), {2, 2, 2})},
                   .outputs = 2,
                   .loss_outputs = {1}});

  // --- NegativeLogLikelihoodLoss: input (N,C[,d...]) of log-probabilities, target (N[,d...]), weight (C) ---
  const auto nll = [&](std::string label, Attributes attributes, std::vector<HarnessInput> inputs) {
    cases.push_back({.label = std::move(label),
                     .op_type = "NegativeLogLikelihoodLoss",
                     .attributes = std::move(attributes),
                     .inputs = std::move(inputs)});
  };
  nll("NegativeLogLikelihoodLoss 2-D mean", {}, {normal({3, 4}), values(labels({0, 3, 1}), {3})});
  nll("NegativeLogLikelihoodLoss 2-D none", {{"reduction", std::string("none")}},
      {normal({4, 3}), values(labels({2, 0, 1, 2}), {4})});
  nll("NegativeLogLikelihoodLoss 2-D sum weights", {{"reduction", std::string("sum")}},
      {normal({4, 5}), values(labels({4, 0, 2, 2}), {4}), constant(positive({5}))});
  nll("NegativeLogLikelihoodLoss 2-D mean weights ignore_index", {{"ignore_index", int64_t{1}}},
      {normal({5, 3}), values(labels({1, 2, 1, 0, 2}), {5}), constant(positive({3}))});
  nll("NegativeLogLikelihoodLoss 4-D mean int32 ignore_index -1", {{"ignore_index", int64_t{-1}}},
      {normal({2, 3, 2, 2}), values(labels({0, -1, 2, 1, 2, 0, -1, 1}), {2, 2, 2}, DType::Int32)});
  nll("NegativeLogLikelihoodLoss 4-D none weights int32 ignore_index",
      {{"reduction", std::string("none")}, {"ignore_index", int64_t{2}}},
      {normal({2, 3, 2, 2}), values(labels({0, 1, 2, 1, 2, 0, 2, 1}), {2, 2, 2}, DType::Int32),
       constant(positive({3}))});
  nll("NegativeLogLikelihoodLoss 3-D sum", {{"reduction", std::string("sum")}},
      {normal({2, 4, 3}), values(labels({2, 0, 3, 1, 2, 3}), {2, 3})});
  return cases;
}

}  // namespace onnxtrain::harness
