// The op-test harness: one table of cases, each a single op with inputs of given sizes, that
// tests/gradient_harness_test.cc runs three ways:
//  1. float64, reference kernels: the training graph's gradients against central finite differences
//     of the loss (relative error ||analytic - numeric|| / max(||analytic||, ||numeric||) below 1e-4);
//  2. float32: every output and gradient of the fastest kernels (oneDNN) against the reference kernels;
//  3. coverage: every gradient rule, backward op and fast kernel is exercised by some case, and every
//     op without a gradient rule says why (kNonDifferentiableOps) — adding an op without a case fails.
// The loss of a case is sum_o sum(y_o * R_o) with fixed random R_o, so every output element gets a
// different upstream gradient.
//
// Kinks. Finite differences are meaningless where the function is not differentiable, so inputs are
// drawn away from kinks rather than tolerances loosened:
//  - Relu, LeakyRelu, PRelu, Abs, Elu, Selu, HardSwish, HardSigmoid: away_from_zero() (|x| >= 0.2, far
//    beyond the 1e-6 step); HardSigmoid/HardSwish cases also stay off their saturation points.
//  - Clip: inputs are drawn away from min and max; at the bounds onnxtrain follows PyTorch (gradient
//    passes where min <= x <= max).
//  - MaxPool, GlobalMaxPool, ReduceMax/Min, Max/Min: distinct() values (a shuffled grid with spacing
//    0.1), so the argmax never changes under the step; on ties onnxtrain routes the gradient to every
//    maximal element of Max/Min/ReduceMax/ReduceMin and to the first of MaxPool and GlobalMaxPool
//    (oneDNN's and PyTorch's choice).
//
//   cases.push_back({.label = "Add broadcast (2,3)+(3)", .op_type = "Add",
//                    .inputs = {normal({2, 3}), normal({3})}});
#pragma once

#include <string>
#include <vector>

#include "graph/attributes.h"
#include "graph/dtype.h"

namespace onnxtrain::harness {

struct HarnessInput {
  enum class Fill { Normal, Positive, AwayFromZero, Distinct, Values, Omitted };
  Fill fill = Fill::Normal;
  std::vector<int64_t> sizes;
  DType dtype = DType::Float32;  // float inputs run as float64 and as float32; others use this dtype
  std::vector<double> values;    // Fill::Values
  bool differentiate = true;     // float inputs only: false makes it a constant (BN mean/var, Clip bounds)
};

// Float inputs that are differentiated.
inline HarnessInput normal(std::vector<int64_t> sizes) {
  return {.fill = HarnessInput::Fill::Normal, .sizes = std::move(sizes)};
}
inline HarnessInput positive(std::vector<int64_t> sizes) {  // uniform in [0.5, 2]
  return {.fill = HarnessInput::Fill::Positive, .sizes = std::move(sizes)};
}
inline HarnessInput away_from_zero(std::vector<int64_t> sizes) {  // |x| in [0.2, ...)
  return {.fill = HarnessInput::Fill::AwayFromZero, .sizes = std::move(sizes)};
}
inline HarnessInput distinct(std::vector<int64_t> sizes) {  // a shuffled grid, spacing 0.1, no ties
  return {.fill = HarnessInput::Fill::Distinct, .sizes = std::move(sizes)};
}
// A float input that is not differentiated (a constant of the graph), drawn like `input`.
inline HarnessInput constant(HarnessInput input) {
  input.differentiate = false;
  return input;
}
// Fixed values: float constants (sizes {} for a scalar) or index/shape/axes tensors of `dtype`.
inline HarnessInput values(std::vector<double> v, std::vector<int64_t> sizes, DType dtype = DType::Int64) {
  return {.fill = HarnessInput::Fill::Values,
          .sizes = std::move(sizes),
          .dtype = dtype,
          .values = std::move(v),
          .differentiate = false};
}
inline HarnessInput int64s(std::vector<int64_t> v) {
  std::vector<double> d(v.begin(), v.end());
  return values(d, {static_cast<int64_t>(v.size())});
}
inline HarnessInput omitted() { return {.fill = HarnessInput::Fill::Omitted}; }

struct GradientCase {
  std::string label;  // unique; becomes the test name
  std::string op_type;
  std::string domain;  // "" = ai.onnx; kTrainingDomain for onnxtrain's own forward ops (TapMajorConv)
  Attributes attributes;
  std::vector<HarnessInput> inputs;
  int outputs = 1;                // the node's leading outputs that exist; later optional outputs are omitted
  std::vector<int> loss_outputs;  // outputs in the loss; empty: every float output
  int opset = 17;
};

// One function per op family, in tests/gradient_cases/.
std::vector<GradientCase> elementwise_gradient_cases();
std::vector<GradientCase> data_movement_gradient_cases();
std::vector<GradientCase> conv_matmul_gradient_cases();
std::vector<GradientCase> pooling_softmax_gradient_cases();
std::vector<GradientCase> normalisation_gradient_cases();
std::vector<GradientCase> reduction_loss_gradient_cases();
std::vector<GradientCase> recurrent_gradient_cases();

}  // namespace onnxtrain::harness
