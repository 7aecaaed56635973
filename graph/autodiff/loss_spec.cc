// The spellings of LossSpec on the command line: parse_loss_spec, parse_loss_reduction and their names.
#include "graph/autodiff/loss.h"
#include "graph/error.h"

namespace onnxtrain {

namespace {

const char* kLossChoices = "cross-entropy, mse, l1, bce-with-logits or output:NAME (a float scalar the model computes)";

}  // namespace

LossSpec parse_loss_spec(const std::string& text) {
  LossSpec spec;
  if (text == "cross-entropy" || text == "softmax-cross-entropy") {
    spec.kind = LossKind::SoftmaxCrossEntropy;
  } else if (text == "mse") {
    spec.kind = LossKind::MeanSquaredError;
  } else if (text == "l1") {
    spec.kind = LossKind::L1;
  } else if (text == "bce-with-logits") {
    spec.kind = LossKind::BinaryCrossEntropyWithLogits;
  } else if (text.rfind("output:", 0) == 0) {
    spec.kind = LossKind::ModelOutput;
    spec.model_output = text.substr(7);
    if (spec.model_output.empty()) throw Error("loss 'output:' names no value; expected output:NAME");
  } else {
    throw Error("unknown loss '" + text + "'; expected " + kLossChoices);
  }
  return spec;
}

LossReduction parse_loss_reduction(const std::string& text) {
  if (text == "mean") return LossReduction::Mean;
  if (text == "sum") return LossReduction::Sum;
  if (text == "none") return LossReduction::None;
  throw Error("unknown loss reduction '" + text + "'; expected mean, sum or none (none trains on the sum)");
}

std::string loss_kind_name(LossKind kind) {
  switch (kind) {
    case LossKind::SoftmaxCrossEntropy:
      return "cross-entropy";
    case LossKind::MeanSquaredError:
      return "mse";
    case LossKind::L1:
      return "l1";
    case LossKind::BinaryCrossEntropyWithLogits:
      return "bce-with-logits";
    case LossKind::ModelOutput:
      return "output";
  }
  return "?";
}

std::string loss_reduction_name(LossReduction reduction) {
  switch (reduction) {
    case LossReduction::Mean:
      return "mean";
    case LossReduction::Sum:
      return "sum";
    case LossReduction::None:
      return "none";
  }
  return "?";
}

}  // namespace onnxtrain
