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
  cases.push_back({.label = "Mul same input constant", .op_type = "Mul", .inputs = {normal({2, 3}), constant(normal({2, 3}))}});
  return cases;
}

}  // namespace onnxtrain::harness
