// The single-pixel convolution (kernels/onednn/single_pixel_conv.h): Conv and ConvGrad whose output is
// one pixel run as matrix products over the taps inside the input (per-channel loops when depthwise).
// Checked against the reference kernels (the oracle) on the shapes that take that path (ResNet's 3x3
// over a 1x1 input, a strided 3x3 whose window hangs over two edges, 1x1 kernels, a kernel the size of
// the input, 1-D and 3-D, dilations, MobileNet's depthwise layers), that they did take it, and that a
// convolution with more than one output pixel or with groups that are not depthwise does not; and that
// within one run (a stream that keeps derived values) the backward reads the weight taps the forward
// gathered, and gathers afresh once they are forgotten.
#include <gtest/gtest.h>

#include <random>

#include "tests/onednn_conv_oracle.h"

namespace onnxtrain {
namespace {

using namespace testing_support;

const std::vector<ConvCase>& single_pixel_cases() {
  static const std::vector<ConvCase> cases = {
      {"ResNet layer4: 3x3 pads 1 over 1x1",
       {{"pads", Ints{1, 1, 1, 1}}},
       {4, 24, 1, 1},
       {20, 24, 3, 3},
       {4, 20, 1, 1}},
      {"3x3 stride 2 pads 1 over 2x2",
       {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}},
       {3, 16, 2, 2},
       {12, 16, 3, 3},
       {3, 12, 1, 1}},
      {"1x1 stride 2 over 2x2", {{"strides", Ints{2, 2}}}, {2, 8, 2, 2}, {6, 8, 1, 1}, {2, 6, 1, 1}, false},
      {"1x1 over 1x1", {}, {5, 7, 1, 1}, {9, 7, 1, 1}, {5, 9, 1, 1}},
      {"kernel the size of the input", {}, {2, 3, 4, 5}, {7, 3, 4, 5}, {2, 7, 1, 1}},
      {"asymmetric pads and a dilation",
       {{"pads", Ints{2, 0, 0, 1}}, {"dilations", Ints{2, 1}}},
       {2, 5, 3, 2},
       {4, 5, 3, 3},
       {2, 4, 1, 1}},
      {"1-D", {{"pads", Ints{1, 1}}}, {3, 6, 1}, {5, 6, 3}, {3, 5, 1}},
      {"3-D", {{"pads", Ints{1, 0, 1, 1, 0, 1}}}, {2, 4, 1, 2, 1}, {3, 4, 3, 2, 3}, {2, 3, 1, 1, 1}},
      // Depthwise (group = C = M): per-channel loops, not matrix products.
      {"depthwise 3x3 pads 1 over 1x1",
       {{"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{24}}},
       {4, 24, 1, 1},
       {24, 1, 3, 3},
       {4, 24, 1, 1}},
      {"depthwise 3x3 stride 2 pads 1 over 2x2",
       {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}, {"group", int64_t{16}}},
       {3, 16, 2, 2},
       {16, 1, 3, 3},
       {3, 16, 1, 1}},
  };
  return cases;
}

// Whether the kernel that ran is the single-pixel one: matrix products, or a depthwise case's loops.
bool single_pixel_path(const ConvCase& c, const std::string& implementation) {
  const bool depthwise = c.attributes.count("group") > 0;
  return implementation.rfind(depthwise ? "depthwise loops" : "matmul ", 0) == 0;
}

TEST(SinglePixelConv, ConvMatchesReferenceAsAMatrixProduct) {
  std::mt19937 rng(31);
  for (const ConvCase& c : single_pixel_cases()) {
    SCOPED_TRACE(c.label);
    std::vector<Tensor> inputs{random_tensor(rng, c.x), random_tensor(rng, c.w)};
    if (c.bias) inputs.push_back(random_tensor(rng, {c.w[0]}));
    const KernelSpec spec = conv_spec(c, inputs);
    const std::string implementation = expect_matches_reference(spec, inputs);
    EXPECT_TRUE(single_pixel_path(c, implementation)) << implementation;
  }
}

TEST(SinglePixelConv, ConvGradMatchesReferenceForEveryOutputSubset) {
  std::mt19937 rng(32);
  // (dX, dW, dB) asked for: all, the weight gradients of a first layer, and dX alone.
  const std::vector<std::array<bool, 3>> subsets = {{true, true, true}, {false, true, true}, {true, false, false}};
  for (const ConvCase& c : single_pixel_cases()) {
    for (const auto& wanted : subsets) {
      SCOPED_TRACE(c.label + " outputs " + std::to_string(wanted[0]) + std::to_string(wanted[1]) +
                   std::to_string(wanted[2]));
      const std::vector<Tensor> inputs{random_tensor(rng, c.y), random_tensor(rng, c.x), random_tensor(rng, c.w)};
      const KernelSpec spec = conv_grad_spec(c, inputs, wanted);
      const std::string implementation = expect_matches_reference(spec, inputs);
      EXPECT_TRUE(single_pixel_path(c, implementation)) << implementation;
    }
  }
}

TEST(SinglePixelConv, TheBackwardReadsTheForwardsGatheredTapsWithinARun) {
  std::mt19937 rng(34);
  const ConvCase& c = single_pixel_cases()[0];  // ResNet's layer4: the centre tap of a 3x3 kernel
  const Tensor x = random_tensor(rng, c.x), w = random_tensor(rng, c.w), dy = random_tensor(rng, c.y);
  const auto prepare = [&](KernelSpec spec) {
    return KernelRegistry::builtin()
        .find(spec.domain, spec.op_type, DeviceKind::Cpu, DType::Float32, "onednn")
        ->prepare(spec);
  };
  KernelSpec conv{.op_type = "Conv", .opset = 17, .attributes = c.attributes, .node_name = "conv"};
  conv.inputs = input_descs({x, w});
  conv.outputs = {{DType::Float32, c.y}};
  KernelSpec grad{
      .op_type = "ConvGrad", .domain = "ai.onnxtrain", .opset = 17, .attributes = c.attributes, .node_name = "grad"};
  grad.inputs = input_descs({dy, x, w});
  grad.outputs = {{DType::Float32, c.x}, TensorDesc{}, TensorDesc{}};  // dX alone: the product with Wv
  const std::unique_ptr<Kernel> forward = prepare(conv), backward = prepare(grad);
  const std::vector<Tensor> alone = run_prepared(*backward, {dy, x, w}, grad.outputs);

  Stream run(DeviceKind::Cpu, 1);
  run.enable_derived_values();
  Tensor y(DType::Float32, c.y), dx(DType::Float32, c.x);
  forward->run(run, views_of({x, w}), views_of({y}));
  const std::string key = "single-pixel W taps 20x24x9 of 4 bytes at 4";  // the centre of 3x3
  const Stream::Derived taps = run.derived(w.raw(), key);
  ASSERT_NE(taps, nullptr) << "the forward kept no taps under '" << key << "'";
  ASSERT_EQ(taps->size(), 20u * 24u * sizeof(float));
  for (int64_t m = 0; m < 20; ++m)
    for (int64_t ch = 0; ch < 24; ++ch)
      ASSERT_EQ(reinterpret_cast<const float*>(taps->data())[m * 24 + ch], w.data<float>()[(m * 24 + ch) * 9 + 4]);
  backward->run(run, views_of({dy, x, w}), views_of({dx, Tensor(), Tensor()}));
  EXPECT_EQ(values<float>(dx), values<float>(alone[0])) << "the kept taps are W's own";

  // What the backward reads is the kept value: zeros kept under the key give a zero dX; forgotten, it
  // gathers W's taps again.
  run.keep_derived(w.raw(), key, std::make_shared<const std::vector<std::byte>>(taps->size()));
  backward->run(run, views_of({dy, x, w}), views_of({dx, Tensor(), Tensor()}));
  EXPECT_EQ(values<float>(dx), std::vector<float>(dx.numel(), 0.0f));
  run.forget_derived(w.raw());
  EXPECT_EQ(run.derived(w.raw(), key), nullptr);
  backward->run(run, views_of({dy, x, w}), views_of({dx, Tensor(), Tensor()}));
  EXPECT_EQ(values<float>(dx), values<float>(alone[0]));
}

TEST(SinglePixelConv, MoreThanOnePixelOrGroupKeepsTheDirectConvolution) {
  std::mt19937 rng(33);
  const std::vector<ConvCase> cases = {
      {"3x3 output", {{"pads", Ints{1, 1, 1, 1}}}, {2, 8, 3, 3}, {8, 8, 3, 3}, {2, 8, 3, 3}},
      {"two groups", {{"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{2}}}, {2, 8, 1, 1}, {6, 4, 3, 3}, {2, 6, 1, 1}},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.label);
    std::vector<Tensor> inputs{random_tensor(rng, c.x), random_tensor(rng, c.w), random_tensor(rng, {c.w[0]})};
    const KernelSpec spec = conv_spec(c, inputs);
    const std::string implementation = expect_matches_reference(spec, inputs);
    EXPECT_EQ(implementation.find("matmul"), std::string::npos) << implementation;
  }
}

}  // namespace
}  // namespace onnxtrain
