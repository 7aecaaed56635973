// Harness cases of the elementwise family: arithmetic with every broadcast pattern (Add, Sub, Mul, Div,
// Pow), the activations and unary math (ActivationGrad) with the attributes that change their math, Clip,
// PRelu, Where, the variadic Max/Min/Sum/Mean, CastLike and Identity. Kinked ops draw away from kinks.
#include "tests/gradient_harness.h"

namespace onnxtrain::harness {

std::vector<GradientCase> elementwise_gradient_cases() {
  std::vector<GradientCase> cases;
  cases.push_back({.label = "Add same shape", .op_type = "Add", .inputs = {normal({2, 3}), normal({2, 3})}});
  cases.push_back({.label = "Add broadcast row", .op_type = "Add", .inputs = {normal({2, 3}), normal({3})}});
  cases.push_back({.label = "Add broadcast both", .op_type = "Add", .inputs = {normal({4, 1, 3}), normal({2, 1})}});
  cases.push_back({.label = "Add broadcast scalar", .op_type = "Add", .inputs = {normal({}), normal({2, 3})}});
  cases.push_back({.label = "Sub broadcast", .op_type = "Sub", .inputs = {normal({2, 1, 4}), normal({3, 4})}});
  cases.push_back({.label = "Mul broadcast", .op_type = "Mul", .inputs = {normal({3, 1}), normal({2, 3, 4})}});
  cases.push_back(
      {.label = "Mul same input constant", .op_type = "Mul", .inputs = {normal({2, 3}), constant(normal({2, 3}))}});
  cases.push_back({.label = "Div same shape", .op_type = "Div", .inputs = {normal({2, 3}), away_from_zero({2, 3})}});
  cases.push_back(
      {.label = "Div broadcast divisor", .op_type = "Div", .inputs = {normal({2, 3, 4}), away_from_zero({3, 1})}});
  cases.push_back(
      {.label = "Div broadcast dividend", .op_type = "Div", .inputs = {normal({3, 1}), away_from_zero({2, 3, 4})}});
  cases.push_back(
      {.label = "Div constant divisor", .op_type = "Div", .inputs = {normal({2, 3}), constant(away_from_zero({3}))}});
  // fmod 1 (floats): the quotient's jumps lie where a / b crosses an integer, which these draws stay off.
  const Attributes fmod{{"fmod", int64_t{1}}};
  cases.push_back({.label = "Mod fmod same shape",
                   .op_type = "Mod",
                   .attributes = fmod,
                   .inputs = {normal({2, 3}), away_from_zero({2, 3})}});
  cases.push_back({.label = "Mod fmod broadcast divisor",
                   .op_type = "Mod",
                   .attributes = fmod,
                   .inputs = {normal({2, 3, 4}), away_from_zero({3, 1})}});
  cases.push_back({.label = "Pow both", .op_type = "Pow", .inputs = {positive({2, 3}), normal({2, 3})}});
  cases.push_back({.label = "Pow broadcast", .op_type = "Pow", .inputs = {positive({2, 1, 4}), normal({3, 1})}});
  cases.push_back({.label = "Pow constant exponent",
                   .op_type = "Pow",
                   .inputs = {normal({2, 3}), values({2.0}, {}, DType::Float32)}});
  cases.push_back({.label = "Pow exponents with a zero",
                   .op_type = "Pow",
                   .inputs = {normal({2, 3}), values({0.0, 2.0, 3.0}, {3}, DType::Float32)}});
  cases.push_back(
      {.label = "Pow int exponent", .op_type = "Pow", .inputs = {normal({2, 3}), values({3}, {}, DType::Int64)}});
  cases.push_back({.label = "Neg", .op_type = "Neg", .inputs = {normal({2, 3})}});
  // The activations and unary math (ActivationGrad); kinked ones draw away from their kinks.
  cases.push_back({.label = "Abs", .op_type = "Abs", .inputs = {away_from_zero({2, 3, 4})}});
  cases.push_back({.label = "Sqrt", .op_type = "Sqrt", .inputs = {positive({2, 3, 4})}});
  cases.push_back({.label = "Exp", .op_type = "Exp", .inputs = {normal({2, 3, 4})}});
  cases.push_back({.label = "Log", .op_type = "Log", .inputs = {positive({2, 3, 4})}});
  cases.push_back({.label = "Reciprocal", .op_type = "Reciprocal", .inputs = {away_from_zero({2, 3, 4})}});
  cases.push_back({.label = "Erf", .op_type = "Erf", .inputs = {normal({2, 3, 4})}});
  cases.push_back({.label = "Sin", .op_type = "Sin", .inputs = {normal({2, 3, 4})}});
  cases.push_back({.label = "Cos", .op_type = "Cos", .inputs = {normal({2, 3, 4})}});
  // Ceil's derivative is 0 (PyTorch's too); the seeded draws in [0.5, 2] stay off the integers where it jumps.
  cases.push_back({.label = "Ceil", .op_type = "Ceil", .inputs = {positive({2, 3})}});
  cases.push_back({.label = "Floor", .op_type = "Floor", .inputs = {positive({2, 3})}});
  cases.push_back({.label = "Sign", .op_type = "Sign", .inputs = {away_from_zero({2, 3})}});
  cases.push_back({.label = "Mish", .op_type = "Mish", .inputs = {normal({2, 3, 4})}, .opset = 18});
  cases.push_back({.label = "Celu alpha 1.5",
                   .op_type = "Celu",
                   .attributes = {{"alpha", 1.5}},
                   .inputs = {away_from_zero({2, 3, 4})},
                   .opset = 12});
  cases.push_back({.label = "Relu", .op_type = "Relu", .inputs = {away_from_zero({2, 3, 4})}});
  cases.push_back({.label = "LeakyRelu default alpha", .op_type = "LeakyRelu", .inputs = {away_from_zero({2, 3, 4})}});
  cases.push_back({.label = "LeakyRelu alpha 0.2",
                   .op_type = "LeakyRelu",
                   .attributes = {{"alpha", 0.2}},
                   .inputs = {away_from_zero({2, 3, 4})}});
  cases.push_back({.label = "Elu default alpha", .op_type = "Elu", .inputs = {away_from_zero({2, 3, 4})}});
  cases.push_back({.label = "Elu alpha 0.5",
                   .op_type = "Elu",
                   .attributes = {{"alpha", 0.5}},
                   .inputs = {away_from_zero({2, 3, 4})}});
  cases.push_back({.label = "Selu default", .op_type = "Selu", .inputs = {away_from_zero({2, 3, 4})}});
  cases.push_back({.label = "Selu alpha gamma",
                   .op_type = "Selu",
                   .attributes = {{"alpha", 1.5}, {"gamma", 2.0}},
                   .inputs = {away_from_zero({2, 3, 4})}});
  cases.push_back({.label = "Sigmoid", .op_type = "Sigmoid", .inputs = {normal({2, 3, 4})}});
  cases.push_back({.label = "Tanh", .op_type = "Tanh", .inputs = {normal({2, 3, 4})}});
  cases.push_back({.label = "Gelu", .op_type = "Gelu", .inputs = {normal({2, 3, 4})}, .opset = 20});
  cases.push_back({.label = "Gelu tanh",
                   .op_type = "Gelu",
                   .attributes = {{"approximate", std::string("tanh")}},
                   .inputs = {normal({2, 3, 4})},
                   .opset = 20});
  cases.push_back({.label = "Softplus", .op_type = "Softplus", .inputs = {normal({2, 3, 4})}});
  cases.push_back({.label = "HardSigmoid default", .op_type = "HardSigmoid", .inputs = {normal({2, 3, 4})}});
  // Kinks at x = -1 and 1: saturated and linear elements both.
  cases.push_back({.label = "HardSigmoid alpha beta",
                   .op_type = "HardSigmoid",
                   .attributes = {{"alpha", 0.5}, {"beta", 0.5}},
                   .inputs = {normal({2, 3, 4})}});
  cases.push_back({.label = "HardSwish", .op_type = "HardSwish", .inputs = {normal({2, 3, 4})}});
  // Clip: bounds as constant inputs (opset 11+), each optional, or attributes before opset 11.
  cases.push_back({.label = "Clip min max",
                   .op_type = "Clip",
                   .inputs = {normal({3, 4}), values({-0.5}, {}, DType::Float32), values({0.6}, {}, DType::Float32)}});
  cases.push_back(
      {.label = "Clip min only", .op_type = "Clip", .inputs = {normal({3, 4}), values({-0.3}, {}, DType::Float32)}});
  cases.push_back({.label = "Clip max only",
                   .op_type = "Clip",
                   .inputs = {normal({3, 4}), omitted(), values({0.4}, {1}, DType::Float32)}});
  cases.push_back({.label = "Clip no bounds", .op_type = "Clip", .inputs = {normal({3, 4})}});
  cases.push_back({.label = "Clip opset 6 attributes",
                   .op_type = "Clip",
                   .attributes = {{"min", -0.5}, {"max", 0.6}},
                   .inputs = {normal({3, 4})},
                   .opset = 6});
  cases.push_back(
      {.label = "PRelu per channel", .op_type = "PRelu", .inputs = {away_from_zero({2, 3, 2, 2}), normal({3, 1, 1})}});
  cases.push_back({.label = "PRelu scalar slope", .op_type = "PRelu", .inputs = {away_from_zero({2, 3}), normal({1})}});
  cases.push_back(
      {.label = "PRelu same shape", .op_type = "PRelu", .inputs = {away_from_zero({2, 3}), normal({2, 3})}});
  cases.push_back({.label = "Where broadcast",
                   .op_type = "Where",
                   .inputs = {values({1, 0, 1, 0, 0, 1}, {2, 3}, DType::Bool), normal({3}), normal({2, 1})}});
  cases.push_back({.label = "Where same shape",
                   .op_type = "Where",
                   .inputs = {values({0, 1, 1, 0, 1, 0}, {2, 3}, DType::Bool), normal({2, 3}), normal({2, 3})}});
  // Max/Min: normal draws never tie across inputs.
  cases.push_back(
      {.label = "Max three broadcast", .op_type = "Max", .inputs = {normal({2, 3}), normal({3}), normal({2, 1})}});
  cases.push_back({.label = "Max one input", .op_type = "Max", .inputs = {normal({2, 3})}});
  cases.push_back({.label = "Min two broadcast", .op_type = "Min", .inputs = {normal({4, 1, 3}), normal({2, 3})}});
  cases.push_back(
      {.label = "Sum three broadcast", .op_type = "Sum", .inputs = {normal({2, 3}), normal({3}), normal({2, 1})}});
  cases.push_back({.label = "Sum one input", .op_type = "Sum", .inputs = {normal({2, 3})}});
  cases.push_back(
      {.label = "Mean three broadcast", .op_type = "Mean", .inputs = {normal({2, 3}), normal({3}), normal({2, 1})}});
  cases.push_back(
      {.label = "CastLike same type", .op_type = "CastLike", .inputs = {normal({2, 3}), constant(normal({1}))}});
  cases.push_back(
      {.label = "Cast to float64", .op_type = "Cast", .attributes = {{"to", int64_t{11}}}, .inputs = {normal({2, 3})}});
  cases.push_back({.label = "Identity", .op_type = "Identity", .inputs = {normal({2, 3})}});
  return cases;
}

}  // namespace onnxtrain::harness
