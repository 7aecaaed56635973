// The attribute by which a training graph's BatchNormalization carries the Relu fused into it, and its
// gradient node the mask it reads (graph/autodiff/batch_norm_relu.h): shared by the rewrite, the
// gradient rule and the kernels, which see only attributes.
#pragma once

#include "graph/attributes.h"

namespace onnxtrain {

inline constexpr const char* kFusedActivation = "fused_activation";  // "Relu", or absent

inline bool fuses_relu(const Attributes& attributes) { return attributes.get_string(kFusedActivation, "") == "Relu"; }

}  // namespace onnxtrain
