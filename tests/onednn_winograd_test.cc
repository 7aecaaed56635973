// oneDNN's Winograd convolution (kernels/onednn/winograd.h) for the 3x3 convolutions where it pays: which
// convolutions winograd_pays takes, and that Conv and ConvGrad over such shapes (64 channels at 8x8, 48 to
// 64 at 9x10, batch 16) run it on AVX-512 and match the reference kernels for every output subset, with and without
// a bias. Winograd's transforms add and subtract terms of the size of the output's largest elements, so
// its error is bounded against those, not against each element: an element that cancels to 0.028 among
// outputs of magnitude 4 came out 1.3e-5 off (ConvGrad's dX, 2026-12-05), which the direct convolutions'
// per-element tolerance (onednn_conv_oracle.h) would fail.
#include <gtest/gtest.h>

#include <array>
#include <random>

#include "kernels/onednn/primitive_sequence_kernel.h"
#include "kernels/onednn/winograd.h"
#include "tests/onednn_conv_oracle.h"

namespace onnxtrain {
namespace {

using namespace testing_support;

reference::WindowGeometry window(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad,
                                 int64_t dilation = 1) {
  return {.input = {in, in},
          .output = {out, out},
          .kernel = {kernel, kernel},
          .strides = {stride, stride},
          .dilations = {dilation, dilation},
          .pad_begin = {pad, pad},
          .pad_end = {pad, pad}};
}

TEST(Winograd, PaysForManyChannelsOverPlanesOfAtLeastEightByEight) {
  EXPECT_TRUE(onednn::winograd_pays({32, 64, 8, 8}, {64, 64, 3, 3}, window(8, 8, 3, 1, 1), 1));
  EXPECT_TRUE(onednn::winograd_pays({32, 32, 16, 16}, {48, 32, 3, 3}, window(16, 16, 3, 1, 1), 1));
  EXPECT_TRUE(onednn::winograd_pays({32, 64, 10, 10}, {64, 64, 3, 3}, window(10, 8, 3, 1, 0), 1));     // no pads
  EXPECT_FALSE(onednn::winograd_pays({2, 16, 14, 14}, {16, 16, 3, 3}, window(14, 14, 3, 1, 1), 1));    // 16 channels
  EXPECT_FALSE(onednn::winograd_pays({2, 64, 8, 8}, {16, 64, 3, 3}, window(8, 8, 3, 1, 1), 1));        // 16 outputs
  EXPECT_FALSE(onednn::winograd_pays({2, 64, 4, 4}, {64, 64, 3, 3}, window(4, 4, 3, 1, 1), 1));        // 4x4 plane
  EXPECT_FALSE(onednn::winograd_pays({2, 64, 16, 16}, {64, 64, 3, 3}, window(16, 8, 3, 2, 1), 1));     // stride 2
  EXPECT_FALSE(onednn::winograd_pays({2, 64, 12, 12}, {64, 64, 3, 3}, window(12, 8, 3, 1, 0, 2), 1));  // dilated
  EXPECT_FALSE(onednn::winograd_pays({2, 64, 8, 8}, {64, 64, 5, 5}, window(8, 8, 5, 1, 2), 1));        // 5x5 kernel
  EXPECT_FALSE(onednn::winograd_pays({2, 64, 8, 8}, {64, 32, 3, 3}, window(8, 8, 3, 1, 1), 2));        // two groups
  EXPECT_TRUE(onednn::winograd_pays({8, 256, 8, 8}, {256, 256, 3, 3}, window(8, 8, 3, 1, 1), 1));
}

// Work: 4x4 tiles times channel pairs, at least the CPU's least work: 2^18 on Intel's (a Xeon's direct
// convolution beat Winograd at a micro-batch of 8 through 64 channels at 8x8), 2^16 elsewhere (an AMD
// EPYC's lost to it down to a batch of 4: benchmarks/winograd_choice_bench).
TEST(Winograd, PaysFromTheLeastWorkOfThisCpu) {
  const int64_t least = onednn::winograd_least_work();
#if defined(__x86_64__)
  EXPECT_EQ(least, __builtin_cpu_is("intel") ? int64_t{1} << 18 : int64_t{1} << 16);
#endif
  ASSERT_TRUE(least == int64_t{1} << 16 || least == int64_t{1} << 18) << least;
  // 64 channels at 8x8: 4 tiles an image, 64 x 64 channel pairs, so 2^14 of work an image.
  const int64_t batch = least >> 14;
  EXPECT_TRUE(onednn::winograd_pays({batch, 64, 8, 8}, {64, 64, 3, 3}, window(8, 8, 3, 1, 1), 1));
  EXPECT_FALSE(onednn::winograd_pays({batch - 1, 64, 8, 8}, {64, 64, 3, 3}, window(8, 8, 3, 1, 1), 1));
  // A pipeline's micro-batch of 8 through ResNet-18's layer1 at 32x32 takes Winograd except on Intel's CPUs.
  EXPECT_EQ(onednn::winograd_pays({8, 64, 8, 8}, {64, 64, 3, 3}, window(8, 8, 3, 1, 1), 1), least < (int64_t{1} << 17));
}

const std::vector<ConvCase>& winograd_cases() {
  static const std::vector<ConvCase> cases = {
      {"3x3 pads 1, 64 channels at 8x8, batch 16",
       {{"pads", Ints{1, 1, 1, 1}}},
       {16, 64, 8, 8},
       {64, 64, 3, 3},
       {16, 64, 8, 8}},
      {"3x3 pads 1, 48 to 64 channels at 9x10 (partial tiles), no bias",
       {{"pads", Ints{1, 1, 1, 1}}},
       {16, 48, 9, 10},
       {64, 48, 3, 3},
       {16, 64, 9, 10},
       false},
  };
  return cases;
}

// oneDNN 2.6 has its Winograd kernels for AVX-512 only.
bool expects_winograd() { return onednn::channel_block_is_16(); }

// Winograd's error against the reference kernels, as a fraction of each output's largest element.
constexpr float kOfLargest = 2e-6f;

TEST(Winograd, ConvMatchesReference) {
  std::mt19937 rng(61);
  for (const ConvCase& c : winograd_cases()) {
    SCOPED_TRACE(c.label);
    std::vector<Tensor> inputs{random_tensor(rng, c.x), random_tensor(rng, c.w)};
    if (c.bias) inputs.push_back(random_tensor(rng, {c.w[0]}));
    const KernelSpec spec = conv_spec(c, inputs);
    const std::string implementation = expect_matches_reference(spec, inputs, kOfLargest);
    if (expects_winograd()) EXPECT_NE(implementation.find("wino"), std::string::npos) << implementation;
  }
}

TEST(Winograd, ConvGradMatchesReferenceForEveryOutputSubset) {
  std::mt19937 rng(62);
  const std::vector<std::array<bool, 3>> subsets = {
      {true, true, true}, {false, true, true}, {true, false, false}, {false, true, false}};
  for (const ConvCase& c : winograd_cases()) {
    for (const auto& wanted : subsets) {
      SCOPED_TRACE(c.label + " outputs " + std::to_string(wanted[0]) + std::to_string(wanted[1]) +
                   std::to_string(wanted[2]));
      const std::vector<Tensor> inputs{random_tensor(rng, c.y), random_tensor(rng, c.x), random_tensor(rng, c.w)};
      const KernelSpec spec = conv_grad_spec(c, inputs, wanted);
      const std::string implementation = expect_matches_reference(spec, inputs, kOfLargest);
      if (expects_winograd()) EXPECT_NE(implementation.find("wino"), std::string::npos) << implementation;
    }
  }
}

}  // namespace
}  // namespace onnxtrain
