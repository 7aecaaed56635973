// What the loss reference kernels forward (losses.cc: SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss)
// and backward (losses_grad.cc: their *Grad ops) share: scores (N,C) or (N,C,D1..Dk) viewed as
// (N, C, D1·…·Dk) with its labels and per-class weights checked, the reduction and ignore_index
// attributes, and the run-time label lookup and range check.
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
