// What the loss reference kernels forward (losses.cc: SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss)
// and backward (losses_grad.cc: their *Grad ops) share: scores (N,C) or (N,C,D1..Dk) viewed as
// (N, C, D1·…·Dk) with its labels and per-class weights checked, the reduction and ignore_index
// attributes, the prepare-time checks of the four ops that every device's kernels share (check_loss,
// check_loss_grad), and the run-time label lookup and range check.
//
//   LossGeometry g = read_loss_geometry(spec, scores, labels, /*weights=*/2);
//   const int64_t label = label_at(inputs[1], e);
//   require_label_in_range(g, "NegativeLogLikelihoodLoss", label, e);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/reference/kernel_plumbing.h"
#include "kernels/reference/nn_common.h"

namespace onnxtrain::reference {

enum class Reduction { None, Sum, Mean };

struct LossGeometry {
  bool softmax = false;                       // SoftmaxCrossEntropyLoss(Grad): log-softmax of the scores
  int64_t batch = 0, classes = 0, inner = 0;  // scores as (N, C, D1·…·Dk)
  Reduction reduction = Reduction::Mean;
  std::string reduction_name = "mean";
  std::optional<int64_t> ignore_index;
  std::vector<int64_t> per_element;  // the labels' sizes: the scores' without C
};

// Checks labels (int32/int64, the scores' sizes without C) and the optional per-class weights (input
// `weights`) against `scores`, and reads reduction and ignore_index. `softmax` is left to the caller.
inline LossGeometry read_loss_geometry(const KernelSpec& spec, const std::vector<int64_t>& scores,
                                       const TensorDesc& labels, size_t weights) {
  if (labels.dtype != DType::Int32 && labels.dtype != DType::Int64) {
    kernel_fail(spec, "labels must be int32 or int64, got " + std::string(dtype_name(labels.dtype)));
  }
  if (scores.size() < 2) kernel_fail(spec, "scores must be (N,C) or (N,C,D1,...), got " + sizes_to_string(scores));
  LossGeometry g;
  g.per_element = scores;
  g.per_element.erase(g.per_element.begin() + 1);
  if (labels.sizes != g.per_element) {
    kernel_fail(spec, "labels " + sizes_to_string(labels.sizes) + " do not match scores " + sizes_to_string(scores) +
                          " (expected " + sizes_to_string(g.per_element) + ")");
  }
  g.batch = scores[0];
  g.classes = scores[1];
  g.inner = product_of(scores, 2);
  if (has_input(spec, weights) && spec.inputs[weights].sizes != std::vector<int64_t>{g.classes}) {
    kernel_fail(spec, "weights " + sizes_to_string(spec.inputs[weights].sizes) + " must have one value per class");
  }
  g.reduction_name = spec.attributes.get_string("reduction", "mean");
  if (g.reduction_name == "none") {
    g.reduction = Reduction::None;
  } else if (g.reduction_name == "sum") {
    g.reduction = Reduction::Sum;
  } else if (g.reduction_name != "mean") {
    kernel_fail(spec, "reduction must be none, sum or mean, got '" + g.reduction_name + "'");
  }
  if (spec.attributes.has("ignore_index")) g.ignore_index = spec.attributes.get_int("ignore_index", 0);
  return g;
}

// SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss(scores, labels, weights?) -> loss, log_prob?: the
// checks every device's kernel makes at prepare (`softmax` set from the op type).
inline Checked<LossGeometry> check_loss(const KernelSpec& spec) {
  const DType dtype = require_same_float_dtype(spec, {0, 2});
  const bool softmax = spec.op_type == "SoftmaxCrossEntropyLoss";
  const std::vector<int64_t>& scores = spec.inputs[0].sizes;
  const TensorDesc& labels = require_input(spec, 1, softmax ? "labels" : "target");
  LossGeometry g = read_loss_geometry(spec, scores, labels, 2);
  g.softmax = softmax;
  const TensorDesc& out = require_output(spec, 0, "loss");
  const std::vector<int64_t> expected = g.reduction == Reduction::None ? g.per_element : std::vector<int64_t>{};
  if (out.sizes != expected || out.dtype != dtype) {
    kernel_fail(spec, "loss must be " + std::string(dtype_name(dtype)) + " " + sizes_to_string(expected) +
                          " for reduction '" + g.reduction_name + "', got " + sizes_to_string(out.sizes));
  }
  if (has_output(spec, 1) && (!g.softmax || spec.outputs[1].sizes != scores || spec.outputs[1].dtype != dtype)) {
    kernel_fail(spec, "log_prob must have the scores' dtype and shape " + sizes_to_string(scores));
  }
  return {dtype, std::move(g)};
}

// The backward ops' geometry: where their labels and weights are among the inputs.
struct LossGradGeometry : LossGeometry {
  size_t labels = 0, weights = 0;  // input slots
};

// SoftmaxCrossEntropyLossGrad(dLoss, log_prob, labels, weights?) and NegativeLogLikelihoodLossGrad(dLoss,
// labels, _, weights?) -> dscores: the checks every device's kernel makes at prepare.
inline Checked<LossGradGeometry> check_loss_grad(const KernelSpec& spec) {
  const bool softmax = spec.op_type == "SoftmaxCrossEntropyLossGrad";
  const size_t labels = softmax ? 2 : 1, weights = 3;
  const DType dtype = require_same_float_dtype(spec, {0, weights});
  const TensorDesc& out = require_output(spec, 0, "dscores");
  const std::vector<int64_t>& scores = out.sizes;
  if (softmax) {
    require_same_dtype(spec, 1, 0);
    if (require_input(spec, 1, "log_prob").sizes != scores) kernel_fail(spec, "dscores must be shaped like log_prob");
  }
  if (out.dtype != dtype) kernel_fail(spec, "the output must be " + std::string(dtype_name(dtype)));
  LossGradGeometry g;
  static_cast<LossGeometry&>(g) = read_loss_geometry(spec, scores, require_input(spec, labels, "labels"), weights);
  g.softmax = softmax;
  g.labels = labels;
  g.weights = weights;
  const std::vector<int64_t> dloss = g.reduction == Reduction::None ? g.per_element : std::vector<int64_t>{};
  if (spec.inputs[0].sizes != dloss) {
    kernel_fail(spec, "dLoss is " + sizes_to_string(spec.inputs[0].sizes) + ", expected " + sizes_to_string(dloss) +
                          " for reduction '" + g.reduction_name + "'");
  }
  return {dtype, std::move(g)};
}

inline int64_t label_at(const TensorView& labels, int64_t i) {
  return labels.dtype == DType::Int32 ? labels.as<const int32_t>()[i] : labels.as<const int64_t>()[i];
}

// Throws naming `op` unless `label` (at element `element`) is a class; call it for labels that are not
// ignore_index.
inline void require_label_in_range(const LossGeometry& g, const std::string& op, int64_t label, int64_t element) {
  if (label < 0 || label >= g.classes) {
    throw Error(op + " kernel: label " + std::to_string(label) + " at element " + std::to_string(element) +
                " is outside [0, " + std::to_string(g.classes) + ") and is not ignore_index");
  }
}

}  // namespace onnxtrain::reference
