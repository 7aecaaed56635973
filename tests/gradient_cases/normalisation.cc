// Harness cases of the normalisations: BatchNormalization (inference with constant running statistics,
// training with batch statistics), InstanceNormalization and LayerNormalization (axes, broadcast Scale,
// omitted B). Scale and B are differentiated inputs; BN's mean/var are constants (State, never trained).
#include "tests/gradient_harness.h"

namespace onnxtrain::harness {

std::vector<GradientCase> normalisation_gradient_cases() {
  std::vector<GradientCase> cases;
  // --- BatchNormalization ---
  cases.push_back(
      {.label = "BatchNormalization inference NCHW",
       .op_type = "BatchNormalization",
       .attributes = {{"epsilon", 1e-3}},
       .inputs = {normal({2, 3, 4, 5}), normal({3}), normal({3}), constant(normal({3})), constant(positive({3}))}});
  cases.push_back(
      {.label = "BatchNormalization inference NC",
       .op_type = "BatchNormalization",
       .inputs = {normal({6, 4}), normal({4}), normal({4}), constant(normal({4})), constant(positive({4}))}});
  cases.push_back(
      {.label = "BatchNormalization training NCHW",
       .op_type = "BatchNormalization",
       .attributes = {{"training_mode", int64_t{1}}, {"momentum", 0.8}},
       .inputs = {normal({3, 2, 3, 4}), normal({2}), normal({2}), constant(normal({2})), constant(positive({2}))},
       .outputs = 3,
       .loss_outputs = {0}});
  cases.push_back(
      {.label = "BatchNormalization training NC",
       .op_type = "BatchNormalization",
       .attributes = {{"training_mode", int64_t{1}}},
       .inputs = {normal({5, 3}), normal({3}), normal({3}), constant(normal({3})), constant(positive({3}))}});
  cases.push_back({.label = "BatchNormalization inference constant scale",
                   .op_type = "BatchNormalization",
                   .inputs = {normal({2, 3, 4}), constant(normal({3})), constant(normal({3})), constant(normal({3})),
                              constant(positive({3}))}});
  cases.push_back(
      {.label = "BatchNormalization opset 9 training saved statistics",
       .op_type = "BatchNormalization",
       .inputs = {normal({4, 2, 3}), normal({2}), normal({2}), constant(normal({2})), constant(positive({2}))},
       .outputs = 5,
       .loss_outputs = {0},
       .opset = 9});
  cases.push_back({.label = "BatchNormalization opset 7 spatial 0",
                   .op_type = "BatchNormalization",
                   .attributes = {{"spatial", int64_t{0}}},
                   .inputs = {normal({3, 2, 2}), normal({2, 2}), normal({2, 2}), constant(normal({2, 2})),
                              constant(positive({2, 2}))},
                   .opset = 7});
  // --- InstanceNormalization ---
  cases.push_back({.label = "InstanceNormalization NCL",
                   .op_type = "InstanceNormalization",
                   .inputs = {normal({2, 3, 5}), normal({3}), normal({3})}});
  cases.push_back({.label = "InstanceNormalization NCHW",
                   .op_type = "InstanceNormalization",
                   .attributes = {{"epsilon", 1e-3}},
                   .inputs = {normal({2, 2, 3, 4}), normal({2}), normal({2})}});
  // --- LayerNormalization ---
  cases.push_back({.label = "LayerNormalization axis -1",
                   .op_type = "LayerNormalization",
                   .inputs = {normal({2, 3, 6}), normal({6}), normal({6})}});
  cases.push_back({.label = "LayerNormalization axis 1",
                   .op_type = "LayerNormalization",
                   .attributes = {{"axis", int64_t{1}}, {"epsilon", 1e-3}},
                   .inputs = {normal({2, 3, 4}), normal({3, 4}), normal({3, 4})}});
  cases.push_back({.label = "LayerNormalization no bias",
                   .op_type = "LayerNormalization",
                   .inputs = {normal({4, 5}), normal({5})}});
  cases.push_back({.label = "LayerNormalization axis 1 no bias",
                   .op_type = "LayerNormalization",
                   .attributes = {{"axis", int64_t{1}}},
                   .inputs = {normal({2, 3, 4}), normal({3, 4}), omitted()}});
  cases.push_back({.label = "LayerNormalization broadcast scale and bias",
                   .op_type = "LayerNormalization",
                   .attributes = {{"axis", int64_t{-2}}},
                   .inputs = {normal({2, 3, 4}), normal({4}), normal({3, 1})}});
  cases.push_back({.label = "LayerNormalization axis 0 constant Scale",
                   .op_type = "LayerNormalization",
                   .attributes = {{"axis", int64_t{0}}},
                   .inputs = {normal({3, 4}), constant(normal({3, 4})), normal({4})}});
  return cases;
}

}  // namespace onnxtrain::harness
