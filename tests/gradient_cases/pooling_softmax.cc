// Harness cases of the pooling, softmax and LRN family: MaxPool (MaxPoolGrad), AveragePool
// (AveragePoolGrad), the global pools, Softmax/LogSoftmax (SoftmaxGrad/LogSoftmaxGrad) and LRN (LRNGrad).
// Max pools draw distinct() inputs so no window has a tie.
#include "tests/gradient_harness.h"

namespace onnxtrain::harness {

std::vector<GradientCase> pooling_softmax_gradient_cases() {
  using Ints = std::vector<int64_t>;
  std::vector<GradientCase> cases;
  // --- MaxPool ---
  cases.push_back({.label = "MaxPool 2x2 stride 2",
                   .op_type = "MaxPool",
                   .attributes = {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}},
                   .inputs = {distinct({2, 2, 4, 4})}});
  cases.push_back({.label = "MaxPool 3x3 stride 1 overlapping",
                   .op_type = "MaxPool",
                   .attributes = {{"kernel_shape", Ints{3, 3}}},
                   .inputs = {distinct({1, 2, 5, 5})}});
  cases.push_back({.label = "MaxPool 3x3 pads stride 2",
                   .op_type = "MaxPool",
                   .attributes = {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
                   .inputs = {distinct({1, 2, 5, 5})}});
  cases.push_back({.label = "MaxPool 2x2 dilations 2",
                   .op_type = "MaxPool",
                   .attributes = {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}},
                   .inputs = {distinct({1, 2, 5, 5})}});
  cases.push_back({.label = "MaxPool 3x3 stride 2 ceil_mode",
                   .op_type = "MaxPool",
                   .attributes = {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}},
                   .inputs = {distinct({1, 2, 6, 6})}});
  cases.push_back(
      {.label = "MaxPool auto_pad SAME_UPPER",
       .op_type = "MaxPool",
       .attributes = {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}},
       .inputs = {distinct({1, 2, 5, 5})}});
  cases.push_back({.label = "MaxPool 1-D kernel 3 stride 2 pads",
                   .op_type = "MaxPool",
                   .attributes = {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}},
                   .inputs = {distinct({2, 3, 9})}});
  cases.push_back({.label = "MaxPool with Indices output",
                   .op_type = "MaxPool",
                   .attributes = {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}},
                   .inputs = {distinct({1, 2, 4, 4})},
                   .outputs = 2});
  // --- AveragePool ---
  cases.push_back({.label = "AveragePool 2x2 stride 2",
                   .op_type = "AveragePool",
                   .attributes = {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}},
                   .inputs = {normal({2, 2, 4, 4})}});
  cases.push_back({.label = "AveragePool 3x3 pads exclude pad",
                   .op_type = "AveragePool",
                   .attributes = {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}},
                   .inputs = {normal({1, 2, 5, 5})}});
  cases.push_back({.label = "AveragePool 3x3 pads count_include_pad",
                   .op_type = "AveragePool",
                   .attributes = {{"kernel_shape", Ints{3, 3}},
                                  {"strides", Ints{2, 2}},
                                  {"pads", Ints{1, 1, 1, 1}},
                                  {"count_include_pad", int64_t{1}}},
                   .inputs = {normal({1, 2, 5, 5})}});
  cases.push_back({.label = "AveragePool 3x3 stride 2 ceil_mode",
                   .op_type = "AveragePool",
                   .attributes = {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}},
                   .inputs = {normal({1, 2, 6, 6})}});
  cases.push_back({.label = "AveragePool ceil_mode count_include_pad overhang",
                   .op_type = "AveragePool",
                   .attributes = {{"kernel_shape", Ints{3, 3}},
                                  {"strides", Ints{2, 2}},
                                  {"pads", Ints{1, 1, 1, 1}},
                                  {"ceil_mode", int64_t{1}},
                                  {"count_include_pad", int64_t{1}}},
                   .inputs = {normal({1, 2, 6, 6})}});
  cases.push_back({.label = "AveragePool 1-D kernel 2 pads",
                   .op_type = "AveragePool",
                   .attributes = {{"kernel_shape", Ints{2}}, {"pads", Ints{1, 0}}},
                   .inputs = {normal({2, 3, 7})}});
  // --- global pools ---
  cases.push_back({.label = "GlobalAveragePool 2-D", .op_type = "GlobalAveragePool", .inputs = {normal({2, 3, 4, 5})}});
  cases.push_back({.label = "GlobalAveragePool 1-D", .op_type = "GlobalAveragePool", .inputs = {normal({2, 3, 6})}});
  cases.push_back(
      {.label = "GlobalAveragePool 1x1 plane", .op_type = "GlobalAveragePool", .inputs = {normal({4, 6, 1, 1})}});
  cases.push_back(
      {.label = "GlobalAveragePool 3-D", .op_type = "GlobalAveragePool", .inputs = {normal({2, 3, 2, 3, 2})}});
  cases.push_back({.label = "GlobalMaxPool 2-D", .op_type = "GlobalMaxPool", .inputs = {distinct({2, 3, 4, 5})}});
  cases.push_back({.label = "GlobalMaxPool 1-D", .op_type = "GlobalMaxPool", .inputs = {distinct({2, 3, 6})}});
  // --- Softmax, LogSoftmax ---
  cases.push_back({.label = "Softmax axis -1 3-D",
                   .op_type = "Softmax",
                   .attributes = {{"axis", int64_t{-1}}},
                   .inputs = {normal({2, 3, 4})}});
  cases.push_back({.label = "Softmax axis 1 3-D",
                   .op_type = "Softmax",
                   .attributes = {{"axis", int64_t{1}}},
                   .inputs = {normal({2, 3, 4})}});
  cases.push_back({.label = "Softmax opset 11 axis 1 coerced to 2-D",
                   .op_type = "Softmax",
                   .attributes = {{"axis", int64_t{1}}},
                   .inputs = {normal({2, 3, 4})},
                   .opset = 11});
  cases.push_back({.label = "LogSoftmax axis -1 3-D",
                   .op_type = "LogSoftmax",
                   .attributes = {{"axis", int64_t{-1}}},
                   .inputs = {normal({2, 3, 4})}});
  cases.push_back({.label = "LogSoftmax axis 1 3-D",
                   .op_type = "LogSoftmax",
                   .attributes = {{"axis", int64_t{1}}},
                   .inputs = {normal({2, 3, 4})}});
  cases.push_back({.label = "LogSoftmax opset 11 axis 1 coerced to 2-D",
                   .op_type = "LogSoftmax",
                   .attributes = {{"axis", int64_t{1}}},
                   .inputs = {normal({2, 3, 4})},
                   .opset = 11});
  // --- LRN (alpha large enough that the normaliser's gradient matters) ---
  cases.push_back({.label = "LRN size 3",
                   .op_type = "LRN",
                   .attributes = {{"size", int64_t{3}}, {"alpha", 0.5}, {"beta", 0.75}, {"bias", 1.0}},
                   .inputs = {normal({2, 5, 3, 3})}});
  cases.push_back({.label = "LRN size 5 bias 2",
                   .op_type = "LRN",
                   .attributes = {{"size", int64_t{5}}, {"alpha", 0.3}, {"beta", 0.6}, {"bias", 2.0}},
                   .inputs = {normal({1, 7, 2, 3})}});
  cases.push_back({.label = "LRN size 4 even window",
                   .op_type = "LRN",
                   .attributes = {{"size", int64_t{4}}, {"alpha", 0.4}, {"beta", 0.75}, {"bias", 1.0}},
                   .inputs = {normal({1, 6, 2, 2})}});
  return cases;
}

}  // namespace onnxtrain::harness
