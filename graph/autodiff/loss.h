// Attaching a loss to a forward graph: what `onnxtrain train --loss ...` minimises. attach_loss adds a
// graph input for the labels, the loss nodes (ai.onnx ops, opset 17, shape-inferred) on one model output
// (the logits; by default the first graph output) and a float scalar graph output, ready for
// build_training_graph. The model's own outputs stay outputs (the logits give accuracy).
//
//   LossSpec spec = parse_loss_spec("cross-entropy");    // or "mse", "l1", "bce-with-logits", "output:NAME"
//   spec.reduction = parse_loss_reduction("sum");         // default mean
//   AttachedLoss loss = attach_loss(model.graph, spec);
//   TrainingGraph t = build_training_graph(model.graph, {.loss = loss.loss});
//   session.run({{"input", x}, {loss.labels, y}});        // y: int64 (N) for cross-entropy
//
// The losses, per element, with x the logits and t the labels (PyTorch's functions of the same name):
//  - softmax_cross_entropy (F.cross_entropy): SoftmaxCrossEntropyLoss on logits (N,C) or (N,C,d1..dk)
//    and int64 (or int32) class labels (N) or (N,d1..dk); labels equal to ignore_index (default -100, as
//    in PyTorch) count for nothing, and mean divides by the labels not ignored. With classes_last the
//    logits are (N,d1..dk,C), as language models write them.
//    With label_smoothing ε, F.cross_entropy(..., label_smoothing=ε).
//  - mse (F.mse_loss): (x − t)²;  l1 (F.l1_loss): |x − t|; float targets shaped like the logits.
//  - bce_with_logits (F.binary_cross_entropy_with_logits), in the stable form
//    max(x,0) − x·t + log(1 + exp(−|x|)) = Relu(x) − x·t + Softplus(−|x|); targets in [0, 1].
//  - output: a float scalar value the model already computes (its labels are the model's own inputs;
//    reduction, ignore_index and label_dtype do not apply).
// Reduction mean (default) or sum gives the scalar; none also outputs the per-element losses (named
// "loss_per_element") and trains on their sum, as `loss.sum().backward()` does in PyTorch.
#pragma once

#include <cstdint>
#include <string>

#include "graph/graph.h"

namespace onnxtrain {

enum class LossKind { SoftmaxCrossEntropy, MeanSquaredError, L1, BinaryCrossEntropyWithLogits, ModelOutput };
enum class LossReduction { Mean, Sum, None };

struct LossSpec {
  LossKind kind = LossKind::SoftmaxCrossEntropy;
  LossReduction reduction = LossReduction::Mean;
  int64_t ignore_index = -100;       // softmax cross-entropy only: labels with this value are ignored
  DType label_dtype = DType::Int64;  // softmax cross-entropy only: int64 or int32
  // Softmax cross-entropy only: the class axis of logits of rank 3 or more is the last, as in a language
  // model's (N, T, V) against (N, T) labels (a Transpose moves it to axis 1); otherwise it is axis 1.
  bool classes_last = false;
  // Softmax cross-entropy only: PyTorch's label_smoothing ε. The target is (1 − ε) on the label plus ε/C on
  // every class, so the loss is (1 − ε)·NLL + ε·mean over the classes of −log p, per label not ignored,
  // reduced as the NLL (mean: over the labels not ignored).
  double label_smoothing = 0;
  std::string model_output;  // kind ModelOutput: the value the model computes as its loss
  std::string attach_to;     // the value the loss is computed from; empty: the first graph output
};

struct AttachedLoss {
  std::string loss;         // the float scalar to minimise (a graph output): "loss", or model_output
  std::string labels;       // the labels graph input ("labels"); empty for kind ModelOutput
  std::string logits;       // the model value the loss is computed from; empty for kind ModelOutput
  std::string per_element;  // reduction none: the unreduced losses (a graph output); else empty
  ValueId loss_value, labels_value, logits_value;
};

// "cross-entropy" (also "softmax-cross-entropy"), "mse", "l1", "bce-with-logits" or "output:NAME";
// throws Error listing the choices.
LossSpec parse_loss_spec(const std::string& text);
// "mean", "sum" or "none"; throws Error listing the choices.
LossReduction parse_loss_reduction(const std::string& text);
std::string loss_kind_name(LossKind kind);  // the parse_loss_spec spelling ("output" for ModelOutput)
std::string loss_reduction_name(LossReduction reduction);

// Adds the labels input, the loss nodes and the loss output to `graph`. New names are "labels", "loss"
// and "loss_per_element" unless the graph already uses them (then "labels_1", ...: read the result).
// Throws Error when the logits are missing or not float, cross-entropy logits are not (N,C) or
// (N,C,d1..dk), the label dtype is not int32/int64, or a ModelOutput is missing or not a float scalar.
AttachedLoss attach_loss(Graph& graph, const LossSpec& spec);

}  // namespace onnxtrain
