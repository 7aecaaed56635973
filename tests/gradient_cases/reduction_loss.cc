#include "tests/gradient_harness.h"

namespace onnxtrain::harness {

std::vector<GradientCase> reduction_loss_gradient_cases() {
  std::vector<GradientCase> cases;
  cases.push_back({.label = "ReduceSum axis 1 keepdims", .op_type = "ReduceSum", .inputs = {normal({2, 3, 4}), int64s({1})}});
  cases.push_back({.label = "ReduceSum axes -1 0 no keepdims", .op_type = "ReduceSum",
                   .attributes = {{"keepdims", int64_t{0}}}, .inputs = {normal({2, 3, 4}), int64s({-1, 0})}});
  cases.push_back({.label = "ReduceSum all", .op_type = "ReduceSum", .inputs = {normal({3, 2})}});
  return cases;
}

}  // namespace onnxtrain::harness
