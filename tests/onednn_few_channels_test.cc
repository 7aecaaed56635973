// oneDNN's Conv and ConvGrad against the reference kernels for convolutions with few channels, where the
// kernels steer oneDNN away from its first choice on an AVX-512 CPU: ConvGrad with fewer input channels than
// AVX-512's block of 16 (the fixture CNN's second convolution, 8 -> 16), or a depthwise one where oneDNN would
// run im2col + GEMM, asks for the weight gradient over channels-last data, which runs oneDNN's AVX-512
// kernel, and for dX in blocks of 8, not padded to 16 (kernels/onednn/conv_grad.cc), and a depthwise one
// over a plane of at most 4 positions runs our own loops; Conv with 8 output channels writes them in blocks
// of 8, not padded to 16 (the CNN's first convolution, 1 -> 8; kernels/onednn/conv.cc). The results agree
// with the reference either way.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "kernels/onednn/primitive_sequence_kernel.h"
#include "tests/onednn_conv_oracle.h"

namespace onnxtrain {
namespace {

using testing_support::expect_matches_reference;
using testing_support::Ints;
using testing_support::random_tensor;

struct GradCase {
  int64_t n, c, m, size, kernel, stride, pad, group = 1;
};

KernelSpec conv_grad_spec(const GradCase& g) {
  const int64_t out = (g.size + 2 * g.pad - g.kernel) / g.stride + 1;
  KernelSpec spec{.op_type = "ConvGrad",
                  .domain = "ai.onnxtrain",
                  .opset = 1,
                  .attributes = {{"strides", Ints{g.stride, g.stride}},
                                 {"pads", Ints{g.pad, g.pad, g.pad, g.pad}},
                                 {"kernel_shape", Ints{g.kernel, g.kernel}},
                                 {"group", g.group}},
                  .node_name = "test"};
  spec.inputs = {{DType::Float32, {g.n, g.m, out, out}},
                 {DType::Float32, {g.n, g.c, g.size, g.size}},
                 {DType::Float32, {g.m, g.c / g.group, g.kernel, g.kernel}}};
  spec.outputs = {{DType::Float32, {g.n, g.c, g.size, g.size}},
                  {DType::Float32, {g.m, g.c / g.group, g.kernel, g.kernel}},
                  {DType::Float32, {g.m}}};
  return spec;
}

// The implementation a case reports after matching the reference: "<dX's kernel>, <dW's kernel>".
std::string implementation_of(const GradCase& g, std::mt19937& rng) {
  const KernelSpec spec = conv_grad_spec(g);
  std::vector<Tensor> inputs;
  for (const TensorDesc& d : spec.inputs) inputs.push_back(random_tensor(rng, d.sizes));
  return expect_matches_reference(spec, inputs);
}

std::string weights_kernel_of(const GradCase& g, std::mt19937& rng) {
  const std::string implementation = implementation_of(g, rng);
  return implementation.substr(implementation.rfind(", ") + 2);
}

TEST(OnednnConvGrad, FewInputChannelsMatchTheReference) {
  std::mt19937 rng(77);
  const GradCase cases[] = {
      {4, 8, 16, 14, 3, 1, 1},  // the fixture CNN's conv2
      {2, 8, 16, 9, 3, 2, 1},   // strided
      {3, 4, 8, 10, 5, 1, 2},   // 5x5
      {2, 8, 24, 7, 3, 1, 0},   // unpadded, 24 outputs
      {2, 12, 16, 6, 3, 1, 1},  // neither 8 nor 16 inputs
  };
  for (const GradCase& g : cases) {
    SCOPED_TRACE("N " + std::to_string(g.n) + " C " + std::to_string(g.c) + " M " + std::to_string(g.m) + " size " +
                 std::to_string(g.size) + " kernel " + std::to_string(g.kernel) + " stride " +
                 std::to_string(g.stride));
    weights_kernel_of(g, rng);
  }
}

// (On a CPU without AVX-512 there is no such kernel to take, and the test checks that none is reported.)
TEST(OnednnConvGrad, EightInputChannelsTakeTheAvx512WeightKernelWhereTheCpuHasIt) {
  std::mt19937 rng(78);
  const std::string weights = weights_kernel_of({4, 8, 16, 14, 3, 1, 1}, rng);
  EXPECT_EQ(weights.starts_with("jit:avx512"), onednn::channel_block_is_16()) << weights;
}

// dX with 8 channels: in blocks of 8 (oneDNN's AVX2 kernel), not padded to AVX-512's 16, where the CPU has
// AVX-512 (the fixture CNN's conv2: 0.29 against 0.45 ms at batch 64, one thread); 4 channels too (padded to
// 8, not 16); 12 channels fill three quarters of a block of 16 and keep oneDNN's choice.
TEST(OnednnConvGrad, EightInputChannelsComputeTheirGradientInBlocksOfEight) {
  std::mt19937 rng(81);
  const auto data_kernel_of = [&](const GradCase& g) {
    const std::string implementation = implementation_of(g, rng);
    return implementation.substr(0, implementation.find(", "));
  };
  for (const GradCase& g : {GradCase{4, 8, 16, 14, 3, 1, 1}, GradCase{3, 4, 8, 10, 5, 1, 2}}) {
    const std::string data = data_kernel_of(g);
    SCOPED_TRACE(std::to_string(g.c) + " input channels: " + data);
    if (onednn::channel_block_is_16()) EXPECT_EQ(data, "jit:avx2");
    EXPECT_TRUE(data.starts_with("jit:"));
  }
  const std::string twelve = data_kernel_of({2, 12, 16, 6, 3, 1, 1});
  EXPECT_EQ(twelve.starts_with("jit:avx512"), onednn::channel_block_is_16()) << twelve;
}

// MobileNetV2's late 3x3 depthwise convolutions at 32x32 input (a 2x2 plane): oneDNN's weight gradient is
// im2col + a GEMM per channel over blocked data (4.1 ms for 576 channels, batch 32, one thread) and its
// depthwise kernel over channels-last (1.2 ms); the live pairs of our own loops
// (kernels/onednn/depthwise_weight_gradient.h) take it, and agree with the reference.
TEST(OnednnConvGrad, DepthwiseOverASmallPlaneRunsItsLivePairsOnly) {
  std::mt19937 rng(80);
  for (const int64_t channels : {64, 384, 576}) {
    SCOPED_TRACE(std::to_string(channels) + " channels");
    EXPECT_EQ(weights_kernel_of({8, channels, channels, 2, 3, 1, 1, channels}, rng), "depthwise small-plane loops");
  }
  // A 3x3 plane (9 positions) stays with oneDNN, over channels-last where its blocked choice is a GEMM.
  const std::string larger = weights_kernel_of({8, 64, 64, 3, 3, 1, 1, 64}, rng);
  EXPECT_EQ(larger.find("depthwise small-plane"), std::string::npos) << larger;
  EXPECT_EQ(larger.find("gemm") == std::string::npos, onednn::channel_block_is_16()) << larger;
}

// The fixture CNN's first convolution: 1 -> 8 channels at 28x28, pads 1.
TEST(OnednnConv, EightOutputChannelsAreNotPaddedToSixteen) {
  std::mt19937 rng(79);
  KernelSpec spec{.op_type = "Conv",
                  .opset = 17,
                  .attributes = {{"pads", Ints{1, 1, 1, 1}}, {"kernel_shape", Ints{3, 3}}},
                  .node_name = "test"};
  spec.inputs = {{DType::Float32, {4, 1, 28, 28}}, {DType::Float32, {8, 1, 3, 3}}, {DType::Float32, {8}}};
  spec.outputs = {{DType::Float32, {4, 8, 28, 28}}};
  std::vector<Tensor> inputs;
  for (const TensorDesc& d : spec.inputs) inputs.push_back(random_tensor(rng, d.sizes));
  const std::string implementation = expect_matches_reference(spec, inputs);
  // oneDNN's 16-channel blocks are its AVX-512 kernels'; its kernel over blocks of 8 is the AVX2 one.
  if (onednn::channel_block_is_16()) EXPECT_EQ(implementation, "jit:avx2");
  EXPECT_TRUE(implementation.starts_with("jit:")) << implementation;
}

}  // namespace
}  // namespace onnxtrain
