// The tap-product convolution (kernels/onednn/tap_product_conv.h): Conv and ConvGrad with one group over a
// small output plane (tap_product_takes) run as matrix products per kernel tap. Checked against the
// reference kernels (the oracle) on the shapes that take that path (ResNet's layer3 3x3 over 2x2, its
// strided 3x3 from 4x4, its layer2 3x3 over 4x4, a 3x3 plane, 2x1 and 1x3 planes, asymmetric pads, a
// dilation, a tap that reads only padding, 1-D and 3-D), that they did take it, and that a 1x1 kernel, a
// grouped convolution, a 5x5 plane and 4x4 planes with little or no padding do not; that the
// runs of a 3x3 kernel over 2x2 are the expected products; and that within one run the backward reads
// the tap-major weight the forward made.
#include <gtest/gtest.h>

#include <array>
#include <random>

#include "kernels/onednn/tap_product_conv.h"
#include "tests/onednn_conv_oracle.h"

namespace onnxtrain {
namespace {

using namespace testing_support;

const std::vector<ConvCase>& tap_product_cases() {
  static const std::vector<ConvCase> cases = {
      {"ResNet layer3: 3x3 pads 1 over 2x2",
       {{"pads", Ints{1, 1, 1, 1}}},
       {4, 24, 2, 2},
       {20, 24, 3, 3},
       {4, 20, 2, 2}},
      {"3x3 stride 2 pads 1 from 4x4",
       {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}},
       {3, 16, 4, 4},
       {12, 16, 3, 3},
       {3, 12, 2, 2}},
      {"ResNet layer2: 3x3 pads 1 over 4x4",
       {{"pads", Ints{1, 1, 1, 1}}},
       {2, 16, 4, 4},
       {12, 16, 3, 3},
       {2, 12, 4, 4}},
      {"3x3 pads 1 over 3x3", {{"pads", Ints{1, 1, 1, 1}}}, {2, 8, 3, 3}, {8, 8, 3, 3}, {2, 8, 3, 3}},
      {"2x1 output", {{"pads", Ints{1, 0, 1, 0}}}, {2, 8, 2, 1}, {6, 8, 3, 1}, {2, 6, 2, 1}, false},
      {"1x3 output of a 2x2 kernel", {{"pads", Ints{0, 1, 1, 0}}}, {2, 5, 2, 3}, {7, 5, 3, 2}, {2, 7, 1, 3}},
      {"asymmetric pads and a dilation",
       {{"pads", Ints{2, 0, 0, 1}}, {"dilations", Ints{2, 1}}},
       {2, 5, 3, 3},
       {4, 5, 3, 3},
       {2, 4, 1, 2}},
      // Pads 2 on a 3x3 kernel over 1x2: row 0 and row 2 of the kernel read only padding for every output.
      {"taps only in the padding", {{"pads", Ints{1, 2, 1, 2}}}, {2, 3, 1, 2}, {4, 3, 3, 3}, {2, 4, 1, 4}},
      {"1-D", {{"pads", Ints{1, 1}}}, {3, 6, 3}, {5, 6, 3}, {3, 5, 3}},
      {"3-D", {{"pads", Ints{1, 0, 1, 1, 0, 1}}}, {2, 4, 1, 2, 2}, {3, 4, 3, 2, 3}, {2, 3, 1, 1, 2}},
  };
  return cases;
}

bool tap_product_path(const std::string& implementation) { return implementation.rfind("tap products", 0) == 0; }

std::unique_ptr<Kernel> prepare_onednn(const KernelSpec& spec) {
  return KernelRegistry::builtin()
      .find(spec.domain, spec.op_type, DeviceKind::Cpu, DType::Float32, "onednn")
      ->prepare(spec);
}

TEST(TapProductConv, WeightTransposeMovesEveryTapAndAddsWhenAsked) {
  // 20 output channels: a whole block of 16 and a partial one; 3 input channels, a 3x3 kernel.
  onednn::TapProductConv g;
  g.out_channels = 20;
  g.in_channels = 3;
  g.kernel_plane = 9;
  const int64_t m = g.out_channels, c = g.in_channels, t = g.kernel_plane, n = m * c * t;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> w(static_cast<size_t>(n)), major(w.size()), back(w.size(), 0.0f);
  for (float& v : w) v = u(rng);
  onednn::TapProductConv::WeightTranspose(g, true).run(w.data(), major.data());
  for (int64_t mo = 0; mo < m; ++mo)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t tap = 0; tap < t; ++tap)
        ASSERT_EQ(major[static_cast<size_t>((tap * c + ci) * m + mo)], w[static_cast<size_t>((mo * c + ci) * t + tap)])
            << "W'[" << tap << "][" << ci << "][" << mo << "]";
  onednn::TapProductConv::WeightTranspose(g, false).run(major.data(), back.data());
  EXPECT_EQ(back, w);
  onednn::TapProductConv::WeightTranspose(g, false, /*adds=*/true).run(major.data(), back.data());
  for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(back[i], w[i] + w[i]) << "element " << i;
}

TEST(TapProductConv, ConvMatchesReference) {
  std::mt19937 rng(41);
  for (const ConvCase& c : tap_product_cases()) {
    SCOPED_TRACE(c.label);
    std::vector<Tensor> inputs{random_tensor(rng, c.x), random_tensor(rng, c.w)};
    if (c.bias) inputs.push_back(random_tensor(rng, {c.w[0]}));
    const std::string implementation = expect_matches_reference(conv_spec(c, inputs), inputs);
    EXPECT_TRUE(tap_product_path(implementation)) << implementation;
  }
}

TEST(TapProductConv, ConvGradMatchesReferenceForEveryOutputSubset) {
  std::mt19937 rng(42);
  const std::vector<std::array<bool, 3>> subsets = {{true, true, true}, {false, true, true}, {true, false, false}};
  for (const ConvCase& c : tap_product_cases()) {
    for (const auto& wanted : subsets) {
      SCOPED_TRACE(c.label + " outputs " + std::to_string(wanted[0]) + std::to_string(wanted[1]) +
                   std::to_string(wanted[2]));
      const std::vector<Tensor> inputs{random_tensor(rng, c.y), random_tensor(rng, c.x), random_tensor(rng, c.w)};
      const std::string implementation = expect_matches_reference(conv_grad_spec(c, inputs, wanted), inputs);
      EXPECT_TRUE(tap_product_path(implementation)) << implementation;
    }
  }
}

TEST(TapProductConv, ThreeByThreeOverTwoByTwoIsElevenProducts) {
  const ConvCase& c = tap_product_cases()[0];
  const reference::WindowGeometry window{.input = {2, 2},
                                         .output = {2, 2},
                                         .kernel = {3, 3},
                                         .strides = {1, 1},
                                         .dilations = {1, 1},
                                         .pad_begin = {1, 1},
                                         .pad_end = {1, 1}};
  const std::optional<onednn::TapProductConv> g = onednn::TapProductConv::of(c.x, c.w, window, 1);
  ASSERT_TRUE(g.has_value());
  // The centre tap reads the whole plane in order (one product over 4 positions), the taps above and below
  // the centre two positions each (one product), the others one position per product.
  std::vector<std::array<int64_t, 4>> runs;
  for (const auto& r : g->runs) runs.push_back({r.tap, r.out_begin, r.in_begin, r.length});
  const std::vector<std::array<int64_t, 4>> expected = {{0, 3, 0, 1}, {1, 2, 0, 2}, {2, 2, 1, 1}, {3, 1, 0, 1},
                                                        {3, 3, 2, 1}, {4, 0, 0, 4}, {5, 0, 1, 1}, {5, 2, 3, 1},
                                                        {6, 1, 2, 1}, {7, 0, 2, 2}, {8, 0, 3, 1}};
  EXPECT_EQ(runs, expected);
}

TEST(TapProductConv, OneByOneKernelsGroupsLargerPlanesAndLittlePaddingKeepTheDirectConvolution) {
  std::mt19937 rng(43);
  const std::vector<ConvCase> cases = {
      {"1x1 stride 2 from 4x4", {{"strides", Ints{2, 2}}}, {2, 8, 4, 4}, {6, 8, 1, 1}, {2, 6, 2, 2}},
      {"two groups", {{"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{2}}}, {2, 8, 2, 2}, {6, 4, 3, 3}, {2, 6, 2, 2}},
      {"5x5 output", {{"pads", Ints{1, 1, 1, 1}}}, {2, 8, 5, 5}, {8, 8, 3, 3}, {2, 8, 5, 5}},
      // 121 of the 144 (tap, position) pairs inside the input: more than 3/4.
      {"3x3 stride 2 pads 1 from 8x8",
       {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}},
       {2, 8, 8, 8},
       {6, 8, 3, 3},
       {2, 6, 4, 4}},
      {"4x4 output without padding", {}, {2, 8, 6, 6}, {6, 8, 3, 3}, {2, 6, 4, 4}},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.label);
    std::vector<Tensor> inputs{random_tensor(rng, c.x), random_tensor(rng, c.w), random_tensor(rng, {c.w[0]})};
    const std::string implementation = expect_matches_reference(conv_spec(c, inputs), inputs);
    EXPECT_FALSE(tap_product_path(implementation)) << implementation;
  }
}

TEST(TapProductConv, TheBackwardReadsTheForwardsTapMajorWeightWithinARun) {
  std::mt19937 rng(44);
  const ConvCase& c = tap_product_cases()[0];
  const Tensor x = random_tensor(rng, c.x), w = random_tensor(rng, c.w), dy = random_tensor(rng, c.y);
  const KernelSpec conv = conv_spec(c, {x, w});
  const KernelSpec grad = conv_grad_spec(c, {dy, x, w}, {true, false, false});  // dX alone: products with W'
  const std::unique_ptr<Kernel> forward = prepare_onednn(conv), backward = prepare_onednn(grad);
  const std::vector<Tensor> alone = run_prepared(*backward, {dy, x, w}, grad.outputs);

  Stream run(DeviceKind::Cpu, 1);
  run.enable_derived_values();
  Tensor y(DType::Float32, c.y), dx(DType::Float32, c.x);
  forward->run(run, views_of({x, w}), views_of({y}));
  const std::string key = "tap-major W 20x24x9";
  const Stream::Derived kept = run.derived(w.raw(), key);
  ASSERT_NE(kept, nullptr) << "the forward kept no W' under '" << key << "'";
  ASSERT_EQ(kept->size(), 20u * 24u * 9u * sizeof(float));
  const auto* wt = reinterpret_cast<const float*>(kept->data());
  for (int64_t m = 0; m < 20; ++m)
    for (int64_t ch = 0; ch < 24; ++ch)
      for (int64_t t = 0; t < 9; ++t)
        ASSERT_EQ(wt[(t * 24 + ch) * 20 + m], w.data<float>()[(m * 24 + ch) * 9 + t]) << m << " " << ch << " " << t;
  backward->run(run, views_of({dy, x, w}), views_of({dx, Tensor(), Tensor()}));
  EXPECT_EQ(values<float>(dx), values<float>(alone[0]));

  // Zeros kept under the key give a zero dX: the backward read the kept value, not W.
  run.keep_derived(w.raw(), key, std::make_shared<const std::vector<std::byte>>(kept->size()));
  backward->run(run, views_of({dy, x, w}), views_of({dx, Tensor(), Tensor()}));
  EXPECT_EQ(values<float>(dx), std::vector<float>(dx.numel(), 0.0f));
}

}  // namespace
}  // namespace onnxtrain
