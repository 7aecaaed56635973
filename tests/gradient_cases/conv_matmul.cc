// Harness cases of the conv, gemm and matmul family: Conv (through ConvGrad), ConvTranspose, Gemm, MatMul,
// FusedMatMul.
#include "graph/op_schema.h"
#include "tests/gradient_harness.h"

namespace onnxtrain::harness {

namespace {

using Ints = std::vector<int64_t>;

// TapMajorConv: Conv on a weight held (k..., C, M) (graph/autodiff/tap_major_conv_weights.h); the CPU's
// tap-product kernel where tap_product_takes the window, the reference otherwise.
void add_tap_major_conv_cases(std::vector<GradientCase>& cases) {
  const auto tap_major = [](std::string label, Attributes attributes, std::vector<HarnessInput> inputs) {
    return GradientCase{.label = std::move(label),
                        .op_type = "TapMajorConv",
                        .domain = kTrainingDomain,
                        .attributes = std::move(attributes),
                        .inputs = std::move(inputs),
                        .opset = 1};
  };
  cases.push_back(tap_major("TapMajorConv 2x2 output bias", {{"pads", Ints{1, 1, 1, 1}}},
                            {normal({3, 5, 2, 2}), normal({3, 3, 5, 4}), normal({4})}));
  cases.push_back(tap_major("TapMajorConv 2x2 output stride 2 no bias",
                            {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}},
                            {normal({2, 3, 4, 4}), normal({3, 3, 3, 4})}));
  cases.push_back(tap_major("TapMajorConv 1x3 output asymmetric kernel", {{"pads", Ints{0, 1, 0, 1}}},
                            {normal({2, 3, 2, 3}), normal({2, 3, 3, 5}), normal({5})}));
  cases.push_back(tap_major("TapMajorConv 3x3 output", {{"pads", Ints{1, 1, 1, 1}}},
                            {normal({2, 2, 3, 3}), normal({3, 3, 2, 3}), normal({3})}));
  cases.push_back(tap_major("TapMajorConv 4x4 output", {{"pads", Ints{1, 1, 1, 1}}},
                            {normal({2, 3, 4, 4}), normal({3, 3, 3, 4}), normal({4})}));
  cases.push_back(tap_major("TapMajorConv 5x5 output (reference fallback)", {{"pads", Ints{1, 1, 1, 1}}},
                            {normal({2, 2, 5, 5}), normal({3, 3, 2, 3}), normal({3})}));
}

void add_conv_cases(std::vector<GradientCase>& cases) {
  cases.push_back({.label = "Conv 2-D stride pad dilation bias",
                   .op_type = "Conv",
                   .attributes = {{"strides", Ints{2, 1}}, {"pads", Ints{1, 1, 1, 1}}, {"dilations", Ints{1, 2}}},
                   .inputs = {normal({2, 3, 7, 6}), normal({4, 3, 3, 2}), normal({4})}});
  cases.push_back({.label = "Conv 2-D groups",
                   .op_type = "Conv",
                   .attributes = {{"group", int64_t{2}}, {"pads", Ints{1, 0, 1, 0}}},
                   .inputs = {normal({2, 4, 5, 5}), normal({6, 2, 3, 3}), normal({6})}});
  cases.push_back({.label = "Conv depthwise",
                   .op_type = "Conv",
                   .attributes = {{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}},
                   .inputs = {normal({2, 3, 6, 6}), normal({3, 1, 3, 3}), normal({3})}});
  // MobileNetV2's late depthwise layers at 32x32 input: a 2x2 plane, where oneDNN's weight gradient runs
  // its depthwise kernel over channels-last data (kernels/onednn/conv_grad.cc).
  cases.push_back({.label = "Conv depthwise 2x2 plane 64 channels",
                   .op_type = "Conv",
                   .attributes = {{"group", int64_t{64}}, {"pads", Ints{1, 1, 1, 1}}},
                   .inputs = {normal({3, 64, 2, 2}), normal({64, 1, 3, 3}), normal({64})}});
  cases.push_back({.label = "Conv 1-D",
                   .op_type = "Conv",
                   .attributes = {{"strides", Ints{2}}, {"pads", Ints{2, 1}}, {"dilations", Ints{2}}},
                   .inputs = {normal({2, 3, 11}), normal({4, 3, 3}), normal({4})}});
  cases.push_back({.label = "Conv no bias", .op_type = "Conv", .inputs = {normal({2, 3, 5, 5}), normal({4, 3, 3, 3})}});
  cases.push_back({.label = "Conv asymmetric pads",
                   .op_type = "Conv",
                   .attributes = {{"pads", Ints{0, 2, 1, 0}}, {"kernel_shape", Ints{3, 2}}},
                   .inputs = {normal({1, 2, 5, 4}), normal({3, 2, 3, 2}), normal({3})}});
  cases.push_back({.label = "Conv auto_pad SAME_UPPER stride 2",
                   .op_type = "Conv",
                   .attributes = {{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2}}},
                   .inputs = {normal({2, 2, 6, 5}), normal({3, 2, 3, 3}), normal({3})}});
  cases.push_back({.label = "Conv 3-D",
                   .op_type = "Conv",
                   .attributes = {{"pads", Ints{1, 0, 1, 1, 0, 0}}, {"strides", Ints{1, 2, 1}}},
                   .inputs = {normal({1, 2, 4, 5, 3}), normal({3, 2, 2, 3, 2}), normal({3})}});
  cases.push_back({.label = "Conv 1x1 stride 2",
                   .op_type = "Conv",
                   .attributes = {{"strides", Ints{2, 2}}},
                   .inputs = {normal({2, 4, 6, 6}), normal({5, 4, 1, 1})}});
  cases.push_back({.label = "Conv 1x1 stride 2 odd size",
                   .op_type = "Conv",
                   .attributes = {{"strides", Ints{2, 3}}},
                   .inputs = {normal({2, 3, 5, 7}), normal({4, 3, 1, 1}), normal({4})}});
  cases.push_back({.label = "Conv 1x1 strides 2 3",
                   .op_type = "Conv",
                   .attributes = {{"strides", Ints{2, 3}}},
                   .inputs = {normal({2, 3, 6, 9}), normal({4, 3, 1, 1})}});
  cases.push_back({.label = "Conv single output pixel (matrix products)",
                   .op_type = "Conv",
                   .attributes = {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}},
                   .inputs = {normal({2, 3, 2, 2}), normal({4, 3, 3, 3}), normal({4})}});
  cases.push_back({.label = "Conv depthwise single output pixel",
                   .op_type = "Conv",
                   .attributes = {{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}},
                   .inputs = {normal({2, 3, 1, 1}), normal({3, 1, 3, 3}), normal({3})}});
  cases.push_back({.label = "Conv constant weight",
                   .op_type = "Conv",
                   .attributes = {{"pads", Ints{1, 1, 1, 1}}},
                   .inputs = {normal({2, 3, 4, 4}), constant(normal({4, 3, 3, 3})), normal({4})}});
  cases.push_back({.label = "Conv constant input",
                   .op_type = "Conv",
                   .attributes = {{"strides", Ints{2, 2}}},
                   .inputs = {constant(normal({2, 3, 5, 5})), normal({4, 3, 3, 3}), normal({4})}});
  cases.push_back({.label = "Conv bias only",
                   .op_type = "Conv",
                   .inputs = {constant(normal({2, 3, 4, 4})), constant(normal({4, 3, 3, 3})), normal({4})}});
  cases.push_back({.label = "ConvTranspose stride",
                   .op_type = "ConvTranspose",
                   .attributes = {{"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 0, 1}}},
                   .inputs = {normal({2, 3, 4, 3}), normal({3, 2, 3, 3}), normal({2})}});
  cases.push_back({.label = "ConvTranspose output_padding groups",
                   .op_type = "ConvTranspose",
                   .attributes = {{"strides", Ints{2, 3}},
                                  {"pads", Ints{1, 1, 1, 1}},
                                  {"output_padding", Ints{1, 2}},
                                  {"group", int64_t{2}},
                                  {"dilations", Ints{1, 2}}},
                   .inputs = {normal({1, 4, 3, 3}), normal({4, 2, 3, 2}), normal({4})}});
  cases.push_back({.label = "ConvTranspose 1-D SAME_UPPER",
                   .op_type = "ConvTranspose",
                   .attributes = {{"strides", Ints{2}}, {"auto_pad", std::string("SAME_UPPER")}},
                   .inputs = {normal({2, 3, 5}), normal({3, 2, 4})}});
}

void add_gemm_cases(std::vector<GradientCase>& cases) {
  const Ints a{4, 3}, a_t{3, 4}, b{3, 5}, b_t{5, 3};
  for (int64_t ta : {0, 1}) {
    for (int64_t tb : {0, 1}) {
      cases.push_back({.label = "Gemm transA " + std::to_string(ta) + " transB " + std::to_string(tb) + " C (N)",
                       .op_type = "Gemm",
                       .attributes = {{"transA", ta}, {"transB", tb}},
                       .inputs = {normal(ta ? a_t : a), normal(tb ? b_t : b), normal({5})}});
    }
  }
  cases.push_back({.label = "Gemm alpha beta C (1,N)",
                   .op_type = "Gemm",
                   .attributes = {{"alpha", 0.5}, {"beta", -1.5}, {"transB", int64_t{1}}},
                   .inputs = {normal(a), normal(b_t), normal({1, 5})}});
  cases.push_back({.label = "Gemm C (M,1)",
                   .op_type = "Gemm",
                   .attributes = {{"beta", 2.0}},
                   .inputs = {normal(a), normal(b), normal({4, 1})}});
  cases.push_back({.label = "Gemm C (M,N) transA",
                   .op_type = "Gemm",
                   .attributes = {{"transA", int64_t{1}}, {"alpha", 2.0}},
                   .inputs = {normal(a_t), normal(b), normal({4, 5})}});
  cases.push_back({.label = "Gemm C scalar",
                   .op_type = "Gemm",
                   .attributes = {{"alpha", -0.7}, {"beta", 0.3}},
                   .inputs = {normal(a), normal(b), normal({})}});
  cases.push_back({.label = "Gemm no C",
                   .op_type = "Gemm",
                   .attributes = {{"transA", int64_t{1}}, {"transB", int64_t{1}}},
                   .inputs = {normal(a_t), normal(b_t)}});
}

void add_matmul_cases(std::vector<GradientCase>& cases) {
  cases.push_back({.label = "MatMul 2-D", .op_type = "MatMul", .inputs = {normal({4, 3}), normal({3, 5})}});
  cases.push_back({.label = "MatMul batched broadcast (2,1,3,4)x(3,4,5)",
                   .op_type = "MatMul",
                   .inputs = {normal({2, 1, 3, 4}), normal({3, 4, 5})}});
  cases.push_back(
      {.label = "MatMul batched (2,3,4)x(4,2)", .op_type = "MatMul", .inputs = {normal({2, 3, 4}), normal({4, 2})}});
  cases.push_back({.label = "MatMul 1-D x 2-D", .op_type = "MatMul", .inputs = {normal({3}), normal({3, 4})}});
  cases.push_back({.label = "MatMul 2-D x 1-D", .op_type = "MatMul", .inputs = {normal({4, 3}), normal({3})}});
  cases.push_back({.label = "MatMul 1-D x batched", .op_type = "MatMul", .inputs = {normal({3}), normal({2, 3, 4})}});
  cases.push_back({.label = "MatMul batched x 1-D", .op_type = "MatMul", .inputs = {normal({2, 4, 3}), normal({3})}});
  cases.push_back({.label = "MatMul 1-D x 1-D", .op_type = "MatMul", .inputs = {normal({5}), normal({5})}});
}

// FusedMatMul (graph/autodiff/fused_matmul.h): every flag pair on batches, rows against a weight (the rule's
// Gemms over flattened rows), broadcast batches, matrices, and the bias.
void add_fused_matmul_cases(std::vector<GradientCase>& cases) {
  const auto fused = [](std::string label, int64_t trans_a, int64_t trans_b, std::vector<HarnessInput> inputs) {
    return GradientCase{.label = std::move(label),
                        .op_type = "FusedMatMul",
                        .domain = kTrainingDomain,
                        .attributes = {{"transA", trans_a}, {"transB", trans_b}},
                        .inputs = std::move(inputs),
                        .opset = 1};
  };
  cases.push_back(fused("FusedMatMul batched", 0, 0, {normal({2, 3, 4}), normal({2, 4, 5})}));
  cases.push_back(fused("FusedMatMul batched transA", 1, 0, {normal({2, 4, 3}), normal({2, 4, 5})}));
  cases.push_back(fused("FusedMatMul batched transB", 0, 1, {normal({2, 3, 4}), normal({2, 5, 4})}));
  cases.push_back(fused("FusedMatMul batched both bias", 1, 1, {normal({2, 4, 3}), normal({2, 5, 4}), normal({5})}));
  cases.push_back(fused("FusedMatMul rows x weight bias", 0, 0, {normal({2, 3, 4}), normal({4, 5}), normal({5})}));
  cases.push_back(fused("FusedMatMul rows x weight transB", 0, 1, {normal({2, 3, 4}), normal({5, 4})}));
  cases.push_back(fused("FusedMatMul transA rows x weight", 1, 1, {normal({2, 4, 3}), normal({5, 4})}));
  cases.push_back(fused("FusedMatMul broadcast (2,1,4,3)x(3,5,4)", 1, 1, {normal({2, 1, 4, 3}), normal({3, 5, 4})}));
  cases.push_back(fused("FusedMatMul weight x batch", 0, 1, {normal({3, 4}), normal({2, 5, 4})}));
  cases.push_back(fused("FusedMatMul 2-D transA bias", 1, 0, {normal({4, 3}), normal({4, 5}), normal({5})}));
}

}  // namespace

std::vector<GradientCase> conv_matmul_gradient_cases() {
  std::vector<GradientCase> cases;
  add_conv_cases(cases);
  add_tap_major_conv_cases(cases);
  add_gemm_cases(cases);
  add_matmul_cases(cases);
  add_fused_matmul_cases(cases);
  return cases;
}

}  // namespace onnxtrain::harness
