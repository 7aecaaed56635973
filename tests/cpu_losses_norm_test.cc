// The "cpu" loss and normalisation kernels (kernels/cpu/losses*.cc, instance_norm*.cc, conv_transpose.cc)
// against the reference kernels on seeded random inputs, float32: SoftmaxCrossEntropyLoss and
// NegativeLogLikelihoodLoss (rows (N,C) and blocked (N,C,D..) layouts with block tails, int32/int64
// labels, weights, ignore_index, every reduction, log_prob), their Grad ops, InstanceNormalization(Grad)
// (odd planes, 1-D to 3-D, a large mean, each subset of outputs) and ConvTranspose on oneDNN's
// deconvolution (strides, pads, dilations, groups, output_padding, output_shape, auto_pad, 1-D to 3-D,
// and the variants that fall back to the reference kernel), and MaxPool and MaxPoolGrad (1-D to 3-D, pads,
// strides, dilations, ceil_mode, ties between window elements).
// The tests run with 4 OpenMP threads, so that the kernels split their work even on a small machine.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

#include "graph/error.h"
#include "graph/op_schema.h"
#include "kernels/kernel.h"
#include "tests/reference_kernel_call.h"

using namespace onnxtrain;

namespace {

using Ints = std::vector<int64_t>;

struct Case {
  std::string op;
  std::string domain;  // "" or kTrainingDomain
  int opset = 17;
  Attributes attributes;
  std::vector<Tensor> inputs;  // a default Tensor is an omitted optional input
  std::vector<TensorDesc> outputs;
};

TensorDesc f32(Ints sizes) { return {DType::Float32, std::move(sizes)}; }

Tensor random_tensor(std::mt19937& rng, const Ints& sizes, float lo = -3, float hi = 3) {
  Tensor t(DType::Float32, sizes);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.data<float>()) v = dist(rng);
  return t;
}

// Labels in [0, classes), about one in `ignore_every` replaced by `ignore` (when ignore_every > 0).
Tensor random_labels(std::mt19937& rng, const Ints& sizes, int64_t classes, DType dtype, int64_t ignore = -100,
                     int ignore_every = 0) {
  Tensor t(dtype, sizes);
  std::uniform_int_distribution<int64_t> dist(0, classes - 1);
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t v = dist(rng);
    if (ignore_every > 0 && dist(rng) % ignore_every == 0) v = ignore;
    if (dtype == DType::Int32)
      t.data<int32_t>()[i] = static_cast<int32_t>(v);
    else
      t.data<int64_t>()[i] = v;
  }
  return t;
}

std::unique_ptr<Kernel> prepare(const Case& c, const std::string& implementation) {
  const KernelSpec spec{c.op,      c.domain,   c.opset, c.attributes, testing_support::input_descs(c.inputs),
                        c.outputs, "test_node"};
  const KernelEntry* entry =
      KernelRegistry::builtin().find(c.domain, c.op, DeviceKind::Cpu, kernel_dtype(spec), implementation);
  if (!entry) throw std::runtime_error("no " + implementation + " kernel for " + c.op);
  if (implementation.empty()) {
    EXPECT_EQ(entry->implementation, "cpu") << c.op;
  }
  return entry->prepare(spec);
}

std::vector<Tensor> run(const Case& c, Kernel& kernel) {
  return testing_support::run_prepared(kernel, c.inputs, c.outputs);
}

// Whether the kernel the cpu factory made is its own (a class named `own`) or the reference fallback.
bool is_own(const Kernel& kernel, const std::string& own) {
  return std::string(typeid(kernel).name()).find(own) != std::string::npos;
}

// Runs the default kernel (which must be "cpu", of class `own` unless `fallback`) and the reference kernel
// and compares every present output: |cpu - reference| <= atol·max(1, max |reference|) + rtol·|reference|.
void expect_agree(const Case& c, const std::string& label, const std::string& own, bool fallback = false,
                  double rtol = 1e-4, double atol = 1e-5) {
  SCOPED_TRACE(c.op + " " + label);
  std::unique_ptr<Kernel> ours = prepare(c, "");
  EXPECT_EQ(is_own(*ours, own), !fallback) << "kernel class " << typeid(*ours).name();
  const std::vector<Tensor> got = run(c, *ours);
  // Twice: a prepared kernel runs many times.
  const std::vector<Tensor> again = run(c, *ours);
  std::unique_ptr<Kernel> reference = prepare(c, "reference");
  const std::vector<Tensor> expected = run(c, *reference);
  for (size_t o = 0; o < got.size(); ++o) {
    if (!c.outputs[o].present()) continue;
    const auto a = got[o].data<float>(), a2 = again[o].data<float>(), b = expected[o].data<float>();
    double scale = 1;  // atol is relative to the largest output, as in the gradient harness
    for (float v : b) scale = std::isfinite(v) ? std::max(scale, std::fabs(static_cast<double>(v))) : scale;
    int failures = 0;
    for (size_t i = 0; i < b.size() && failures < 5; ++i) {
      const bool same = std::isnan(b[i])   ? std::isnan(a[i])
                        : std::isinf(b[i]) ? a[i] == b[i]
                                           : std::fabs(a[i] - b[i]) <= atol * scale + rtol * std::fabs(b[i]);
      if (!same || !(a[i] == a2[i] || (std::isnan(a[i]) && std::isnan(a2[i])))) {
        ADD_FAILURE() << "output " << o << " element " << i << ": cpu " << a[i] << " (rerun " << a2[i]
                      << "), reference " << b[i];
        ++failures;
      }
    }
  }
}

class CpuLossesNorm : public ::testing::Test {
 protected:
  void SetUp() override {
    threads_ = omp_get_max_threads();
    omp_set_num_threads(4);
  }
  void TearDown() override { omp_set_num_threads(threads_); }
  int threads_ = 1;
};

const Attributes kNone{{"reduction", std::string("none")}};
const Attributes kSum{{"reduction", std::string("sum")}};

// Scores shaped like `scores` (N,C,...) and the per-element shape of the labels.
Ints per_element(const Ints& scores) {
  Ints e = scores;
  e.erase(e.begin() + 1);
  return e;
}

struct LossVariant {
  std::string name;
  Attributes attributes;
  bool weights = false;
  DType labels = DType::Int64;
  int ignore_every = 0;  // labels set to ignore_index about one in this many (0: none)
};

std::vector<LossVariant> loss_variants() {
  Attributes ignore_mean{{"ignore_index", int64_t{-1}}};
  Attributes ignore_none = kNone;
  ignore_none["ignore_index"] = int64_t{2};
  Attributes ignore_sum = kSum;
  ignore_sum["ignore_index"] = int64_t{0};
  return {{"mean", {}},
          {"none int32", kNone, false, DType::Int32},
          {"sum weights", kSum, true},
          {"mean weights ignore_index", ignore_mean, true, DType::Int64, 4},
          {"none weights ignore_index int32", ignore_none, true, DType::Int32, 3},
          {"sum ignore_index", ignore_sum, false, DType::Int64, 5}};
}

int64_t ignore_of(const Attributes& a) { return a.has("ignore_index") ? a.get_int("ignore_index", 0) : -100; }

const std::vector<Ints> kLossShapes = {{64, 10},     {3000, 13}, {37, 1003},     {5, 16, 1000},
                                       {3, 7, 5, 9}, {4, 1},     {2, 3, 2, 2, 3}};

TEST_F(CpuLossesNorm, DefaultKernelsAreCpuForFloat32Only) {
  for (const auto& [domain, op] :
       std::vector<std::pair<std::string, std::string>>{{"", "SoftmaxCrossEntropyLoss"},
                                                        {"", "NegativeLogLikelihoodLoss"},
                                                        {"", "InstanceNormalization"},
                                                        {"", "ConvTranspose"},
                                                        {kTrainingDomain, "SoftmaxCrossEntropyLossGrad"},
                                                        {kTrainingDomain, "NegativeLogLikelihoodLossGrad"},
                                                        {kTrainingDomain, "InstanceNormalizationGrad"}}) {
    const KernelEntry* entry = KernelRegistry::builtin().find(domain, op, DeviceKind::Cpu, DType::Float32);
    ASSERT_NE(entry, nullptr) << op;
    EXPECT_EQ(entry->implementation, "cpu") << op;
    const KernelEntry* f64 = KernelRegistry::builtin().find(domain, op, DeviceKind::Cpu, DType::Float64);
    ASSERT_NE(f64, nullptr) << op;
    EXPECT_EQ(f64->implementation, "reference") << op;
  }
}

TEST_F(CpuLossesNorm, SoftmaxCrossEntropyLossMatchesReference) {
  std::mt19937 rng(1);
  for (const Ints& scores : kLossShapes) {
    for (const LossVariant& v : loss_variants()) {
      const int64_t classes = scores[1];
      const Ints labels = per_element(scores);
      const bool none = v.attributes.has("reduction");
      const Ints loss = none && v.attributes.get_string("reduction", "") == "none" ? labels : Ints{};
      for (bool log_prob : {false, true}) {
        Case c{"SoftmaxCrossEntropyLoss",
               "",
               13,
               v.attributes,
               {random_tensor(rng, scores, -8, 8),
                random_labels(rng, labels, classes, v.labels, ignore_of(v.attributes), v.ignore_every),
                v.weights ? random_tensor(rng, {classes}, 0.1f, 2) : Tensor()},
               {f32(loss), log_prob ? f32(scores) : TensorDesc{}}};
        expect_agree(c, v.name + (log_prob ? " log_prob " : " ") + ::testing::PrintToString(scores), "LossKernel");
      }
    }
  }
}

TEST_F(CpuLossesNorm, SoftmaxCrossEntropyLossExtremeScores) {
  std::mt19937 rng(2);
  // Scores spread over ±80 (exp underflows for most classes) and -inf scores (masked classes).
  for (const Ints& scores : {Ints{16, 33}, Ints{3, 9, 300}}) {
    Tensor s = random_tensor(rng, scores, -80, 80);
    Tensor labels = random_labels(rng, per_element(scores), scores[1], DType::Int64);
    for (int64_t i = 0; i < s.numel(); i += 7) {
      s.data<float>()[i] = -INFINITY;
    }
    // The labels never point at a -inf score (the loss would be inf in both).
    const int64_t inner = s.numel() / (scores[0] * scores[1]);
    for (int64_t e = 0; e < labels.numel(); ++e) {
      const int64_t n = e / inner, d = e % inner;
      int64_t& l = labels.data<int64_t>()[e];
      while (std::isinf(s.data<float>()[(n * scores[1] + l) * inner + d])) l = (l + 1) % scores[1];
    }
    expect_agree({"SoftmaxCrossEntropyLoss", "", 13, kNone, {s, labels}, {f32(per_element(scores)), f32(scores)}},
                 "extreme " + ::testing::PrintToString(scores), "LossKernel");
  }
}

TEST_F(CpuLossesNorm, NegativeLogLikelihoodLossMatchesReference) {
  std::mt19937 rng(3);
  for (const Ints& scores : kLossShapes) {
    for (const LossVariant& v : loss_variants()) {
      const Ints labels = per_element(scores);
      const Ints loss = v.attributes.get_string("reduction", "mean") == "none" ? labels : Ints{};
      Case c{"NegativeLogLikelihoodLoss",
             "",
             13,
             v.attributes,
             {random_tensor(rng, scores, -8, 0),
              random_labels(rng, labels, scores[1], v.labels, ignore_of(v.attributes), v.ignore_every),
              v.weights ? random_tensor(rng, {scores[1]}, 0.1f, 2) : Tensor()},
             {f32(loss)}};
      expect_agree(c, v.name + " " + ::testing::PrintToString(scores), "LossKernel");
    }
  }
}

TEST_F(CpuLossesNorm, LossGradsMatchReference) {
  std::mt19937 rng(4);
  for (const Ints& scores : kLossShapes) {
    for (const LossVariant& v : loss_variants()) {
      const Ints labels = per_element(scores);
      const Ints dloss = v.attributes.get_string("reduction", "mean") == "none" ? labels : Ints{};
      const Tensor l = random_labels(rng, labels, scores[1], v.labels, ignore_of(v.attributes), v.ignore_every);
      const Tensor w = v.weights ? random_tensor(rng, {scores[1]}, 0.1f, 2) : Tensor();
      // log_prob as the forward makes it: the log-softmax of random scores.
      Attributes forward_attributes = v.attributes;
      forward_attributes["reduction"] = std::string("none");
      Case forward{"SoftmaxCrossEntropyLoss", "", 13, forward_attributes, {random_tensor(rng, scores, -8, 8), l},
                   {f32(labels), f32(scores)}};
      const Tensor log_prob = run(forward, *prepare(forward, "reference"))[1];
      expect_agree({"SoftmaxCrossEntropyLossGrad",
                    kTrainingDomain,
                    1,
                    v.attributes,
                    {random_tensor(rng, dloss, -2, 2), log_prob, l, w},
                    {f32(scores)}},
                   v.name + " " + ::testing::PrintToString(scores), "LossGradKernel");
      Tensor shape(DType::Int64, {static_cast<int64_t>(scores.size())});
      for (size_t i = 0; i < scores.size(); ++i) shape.data<int64_t>()[i] = scores[i];
      expect_agree({"NegativeLogLikelihoodLossGrad",
                    kTrainingDomain,
                    1,
                    v.attributes,
                    {random_tensor(rng, dloss, -2, 2), l, shape, w},
                    {f32(scores)}},
                   v.name + " " + ::testing::PrintToString(scores), "LossGradKernel");
    }
  }
}

TEST_F(CpuLossesNorm, EveryLabelIgnored) {
  // mean over no element: NaN forward (0/0, as in PyTorch), zero gradient.
  std::mt19937 rng(5);
  const Attributes a{{"ignore_index", int64_t{3}}};
  Tensor labels(DType::Int64, {8, 40});
  for (int64_t& v : labels.data<int64_t>()) v = 3;
  const Tensor scores = random_tensor(rng, {8, 5, 40});
  expect_agree({"SoftmaxCrossEntropyLoss", "", 13, a, {scores, labels}, {f32({})}}, "all ignored", "LossKernel");
  expect_agree({"SoftmaxCrossEntropyLossGrad",
                kTrainingDomain,
                1,
                a,
                {random_tensor(rng, {}), scores, labels},
                {f32({8, 5, 40})}},
               "all ignored", "LossGradKernel");
}

TEST_F(CpuLossesNorm, LabelOutOfRangeIsAnError) {
  std::mt19937 rng(6);
  for (const Ints& scores : {Ints{300, 4}, Ints{6, 4, 500}}) {
    Tensor labels = random_labels(rng, per_element(scores), 4, DType::Int64);
    labels.data<int64_t>()[labels.numel() - 3] = 4;
    labels.data<int64_t>()[labels.numel() - 1] = -2;
    for (const char* op : {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"}) {
      Case c{op, "", 13, {}, {random_tensor(rng, scores), labels}, {f32({})}};
      std::unique_ptr<Kernel> kernel = prepare(c, "");
      try {
        run(c, *kernel);
        ADD_FAILURE() << op << " accepted a label out of range";
      } catch (const Error& e) {
        // The first bad element, as the reference kernel reports it.
        EXPECT_NE(std::string(e.what()).find("label 4 at element " + std::to_string(labels.numel() - 3)),
                  std::string::npos)
            << e.what();
      }
    }
    Case grad{"SoftmaxCrossEntropyLossGrad",
              kTrainingDomain,
              1,
              {},
              {random_tensor(rng, {}), random_tensor(rng, scores), labels},
              {f32(scores)}};
    EXPECT_THROW(run(grad, *prepare(grad, "")), Error);
  }
}

TEST_F(CpuLossesNorm, InstanceNormalizationMatchesReference) {
  std::mt19937 rng(7);
  for (const Ints& x : {Ints{4, 16, 33, 31}, Ints{2, 3, 1000}, Ints{2, 4, 3, 5, 7}, Ints{1, 1, 1}, Ints{3, 64, 7}}) {
    for (const double epsilon : {1e-5, 0.1}) {
      const Attributes a{{"epsilon", epsilon}};
      const Ints c{x[1]};
      expect_agree({"InstanceNormalization",
                    "",
                    6,
                    a,
                    {random_tensor(rng, x), random_tensor(rng, c), random_tensor(rng, c)},
                    {f32(x)}},
                   ::testing::PrintToString(x), "InstanceNormKernel");
    }
  }
  // A large mean against a small spread: the statistics must not lose it.
  const Ints x{2, 3, 17, 19};
  Tensor shifted = random_tensor(rng, x, 999, 1001);
  expect_agree(
      {"InstanceNormalization", "", 6, {}, {shifted, random_tensor(rng, {3}), random_tensor(rng, {3})}, {f32(x)}},
      "large mean", "InstanceNormKernel", false, 2e-4, 1e-4);
}

TEST_F(CpuLossesNorm, InstanceNormalizationGradMatchesReference) {
  std::mt19937 rng(8);
  for (const Ints& x : {Ints{4, 16, 33, 31}, Ints{2, 3, 1000}, Ints{2, 4, 3, 5, 7}, Ints{5, 2, 1}}) {
    const Ints c{x[1]};
    const TensorDesc none;
    for (const std::vector<TensorDesc>& outputs :
         {std::vector<TensorDesc>{f32(x), f32(c), f32(c)}, {f32(x)}, {none, f32(c), f32(c)}, {f32(x), none, f32(c)}}) {
      expect_agree({"InstanceNormalizationGrad",
                    kTrainingDomain,
                    1,
                    {{"epsilon", 1e-3}},
                    {random_tensor(rng, x), random_tensor(rng, x, -1, 4), random_tensor(rng, c)},
                    outputs},
                   ::testing::PrintToString(x) + " outputs " + std::to_string(outputs.size()),
                   "InstanceNormGradKernel");
    }
  }
}

struct ConvTransposeCase {
  std::string name;
  Ints x, w, y;
  Attributes attributes;
  bool bias = true;
  bool fallback = false;
};

TEST_F(CpuLossesNorm, ConvTransposeMatchesReference) {
  std::mt19937 rng(9);
  const std::vector<ConvTransposeCase> cases = {
      {"2-D stride 2 pads",
       {2, 8, 9, 9},
       {8, 6, 3, 3},
       {2, 6, 17, 17},
       {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {"2-D plain no bias", {3, 5, 7, 6}, {5, 4, 3, 2}, {3, 4, 9, 7}, {}, false},
      {"2-D output_padding",
       {2, 4, 5, 5},
       {4, 3, 3, 3},
       {2, 3, 12, 11},
       {{"strides", Ints{2, 2}}, {"output_padding", Ints{1, 0}}}},
      {"2-D groups dilations",
       {2, 6, 6, 7},
       {6, 2, 3, 2},
       {2, 6, 10, 9},
       {{"group", int64_t{3}}, {"dilations", Ints{2, 2}}}},
      {"2-D groups stride 3 asymmetric pads",
       {1, 4, 5, 6},
       {4, 5, 3, 4},
       {1, 10, 13, 18},
       {{"group", int64_t{2}}, {"strides", Ints{3, 3}}, {"pads", Ints{0, 1, 2, 0}}}},
      {"2-D output_shape",
       {2, 3, 4, 4},
       {3, 2, 3, 3},
       {2, 2, 10, 9},
       {{"strides", Ints{2, 2}}, {"output_shape", Ints{10, 9}}}},
      {"2-D SAME_UPPER",
       {2, 3, 5, 4},
       {3, 2, 3, 3},
       {2, 2, 10, 8},
       {{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}}},
      {"2-D SAME_LOWER",
       {2, 3, 5, 4},
       {3, 2, 4, 3},
       {2, 2, 10, 8},
       {{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_LOWER")}}},
      {"1-D", {4, 6, 33}, {6, 5, 4}, {4, 5, 68}, {{"strides", Ints{2}}}},
      {"1-D SAME_UPPER", {2, 3, 9}, {3, 4, 3}, {2, 4, 9}, {{"auto_pad", std::string("SAME_UPPER")}}},
      {"3-D",
       {2, 4, 4, 5, 3},
       {4, 3, 2, 3, 2},
       {2, 3, 8, 12, 6},
       {{"strides", Ints{2, 2, 2}}, {"pads", Ints{0, 0, 0, 0, 0, 1}}, {"output_padding", Ints{0, 1, 1}}}},
      {"DCGAN-like 4x4 stride 2",
       {8, 32, 8, 8},
       {32, 16, 4, 4},
       {8, 16, 16, 16},
       {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      // An output_shape reaching further past the full result than a stride: the reference kernel.
      {"output_shape beyond the stride (fallback)",
       {1, 2, 3, 3},
       {2, 2, 3, 3},
       {1, 2, 10, 7},
       {{"output_shape", Ints{10, 7}}},
       true,
       true},
  };
  for (const ConvTransposeCase& t : cases) {
    const Ints bias{t.y[1]};
    expect_agree({"ConvTranspose",
                  "",
                  17,
                  t.attributes,
                  {random_tensor(rng, t.x), random_tensor(rng, t.w), t.bias ? random_tensor(rng, bias) : Tensor()},
                  {f32(t.y)}},
                 t.name, "ConvTransposeKernel", t.fallback);
  }
}

}  // namespace

namespace {

// An (N, C, spatial...) pool's output sizes, as ONNX's MaxPool computes them.
Ints pooled_sizes(const Ints& x, const Ints& kernel, const Ints& strides, const Ints& pads, const Ints& dilations,
                  bool ceil_mode) {
  Ints y{x[0], x[1]};
  const size_t n = kernel.size();
  for (size_t d = 0; d < n; ++d) {
    const int64_t span = x[d + 2] + pads[d] + pads[d + n] - ((kernel[d] - 1) * dilations[d] + 1);
    int64_t out = (ceil_mode ? (span + strides[d] - 1) / strides[d] : span / strides[d]) + 1;
    if (ceil_mode && (out - 1) * strides[d] >= x[d + 2] + pads[d]) --out;  // the last window starts inside
    y.push_back(out);
  }
  return y;
}

// Small integers as floats, so that windows hold ties: the first maximal element must win.
Tensor tied_tensor(std::mt19937& rng, const Ints& sizes) {
  Tensor t(DType::Float32, sizes);
  std::uniform_int_distribution<int> dist(0, 3);
  for (float& v : t.data<float>()) v = static_cast<float>(dist(rng));
  return t;
}

}  // namespace

TEST_F(CpuLossesNorm, MaxPoolAndItsGradientMatchTheReference) {
  std::mt19937 rng(11);
  struct Pool {
    std::string label;
    Ints x, kernel, strides, pads, dilations;
    bool ceil_mode = false;
  };
  const std::vector<Pool> pools = {
      {"cnn 2x2/2", {3, 5, 8, 8}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
      {"2x2/2 on odd sizes", {2, 3, 7, 9}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
      // Rows of windows that are not a whole number of vector passes (the last pass overlaps the one
      // before), shorter than the narrowest pass, and the CNN's 14 and 7.
      {"2x2/2, rows of 7 windows", {2, 3, 6, 14}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
      {"2x2/2, rows of 14 windows", {1, 2, 4, 28}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
      {"2x2/2, rows of 21 windows and a column left", {1, 2, 5, 43}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
      {"2x2/2, rows of 3 windows", {1, 2, 4, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
      {"2x2/2 ceil_mode past the edge", {2, 3, 7, 9}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true},
      {"resnet stem 3x3/2 pad 1", {2, 4, 9, 11}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      // Rows up to 32 wide take one vector for all their windows (max_pool_window.h kNarrowWidth): ResNet's
      // stem pool at 32x32 (16 wide), the widest such row, and the narrowest wider one.
      {"resnet stem at 32x32", {2, 3, 16, 16}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {"3x3/1 pad 1, rows of 16 windows", {1, 2, 5, 16}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {"3x3/2 pad 1, 32 wide", {1, 2, 6, 32}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {"3x3/2 pad 1, 33 wide (vector passes)", {1, 2, 6, 33}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      // Output rows longer than one vectorised chunk of 16 windows, and a chunk cut short.
      {"resnet stem, wide rows", {2, 3, 6, 75}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},
      {"3x3/1, wide rows", {1, 2, 5, 40}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {"ceil_mode, uneven pads", {2, 3, 7, 6}, {3, 2}, {2, 2}, {0, 1, 1, 0}, {1, 1}, true},
      {"dilated", {1, 2, 10, 9}, {2, 3}, {1, 2}, {1, 0, 1, 2}, {2, 2}},
      {"1-D", {2, 3, 13}, {3}, {2}, {1, 1}, {1}},
      {"3-D", {1, 2, 5, 6, 4}, {2, 2, 2}, {2, 1, 2}, {0, 1, 0, 1, 0, 1}, {1, 1, 1}},
  };
  for (const Pool& p : pools) {
    const Attributes attributes{{"kernel_shape", p.kernel},
                                {"strides", p.strides},
                                {"pads", p.pads},
                                {"dilations", p.dilations},
                                {"ceil_mode", int64_t{p.ceil_mode ? 1 : 0}}};
    const Ints y = pooled_sizes(p.x, p.kernel, p.strides, p.pads, p.dilations, p.ceil_mode);
    const Tensor x = tied_tensor(rng, p.x);
    expect_agree({"MaxPool", "", 17, attributes, {x}, {f32(y)}}, p.label, "MaxPoolKernel", false, 0, 0);
    // Exact: with windows that do not overlap no dX element sums two dY, and small integers sum exactly.
    expect_agree({"MaxPoolGrad", kTrainingDomain, 17, attributes, {tied_tensor(rng, y), x}, {f32(p.x)}}, p.label,
                 "MaxPoolGradKernel", false, 0, 0);
    expect_agree({"MaxPool", "", 17, attributes, {random_tensor(rng, p.x)}, {f32(y)}}, p.label + ", distinct values",
                 "MaxPoolKernel", false, 0, 0);
    // NaN never wins a comparison, yet a window whose first element (in window order) is NaN keeps it.
    Tensor with_nan = tied_tensor(rng, p.x);
    std::span<float> values = with_nan.data<float>();
    for (size_t i = 0; i < values.size(); i += 7) values[i] = std::numeric_limits<float>::quiet_NaN();
    expect_agree({"MaxPool", "", 17, attributes, {with_nan}, {f32(y)}}, p.label + ", NaN", "MaxPoolKernel", false, 0,
                 0);
    expect_agree({"MaxPoolGrad", kTrainingDomain, 17, attributes, {tied_tensor(rng, y), with_nan}, {f32(p.x)}},
                 p.label + ", NaN", "MaxPoolGradKernel", false, 0, 0);
    // A window whose elements inside the input are all -inf takes the first of them, not a padded tap.
    Tensor with_minus_inf = tied_tensor(rng, p.x);
    for (float& v : with_minus_inf.data<float>()) v = v > 1 ? v : -std::numeric_limits<float>::infinity();
    expect_agree({"MaxPoolGrad", kTrainingDomain, 17, attributes, {tied_tensor(rng, y), with_minus_inf}, {f32(p.x)}},
                 p.label + ", -inf", "MaxPoolGradKernel", false, 0, 0);
  }
  // Random geometries, as onednn_nn_test draws them for AveragePool.
  std::uniform_int_distribution<int64_t> one_to_three(1, 3);
  for (int trial = 0; trial < 40; ++trial) {
    const size_t spatial = static_cast<size_t>(1 + trial % 3);
    Ints x{one_to_three(rng), one_to_three(rng)}, kernel, strides, dilations, pads(2 * spatial);
    for (size_t d = 0; d < spatial; ++d) {
      kernel.push_back(one_to_three(rng));
      strides.push_back(one_to_three(rng));
      dilations.push_back(1 + trial % 2);
      pads[d] = std::uniform_int_distribution<int64_t>(0, kernel[d] - 1)(rng);
      pads[d + spatial] = std::uniform_int_distribution<int64_t>(0, kernel[d] - 1)(rng);
      x.push_back((kernel[d] - 1) * dilations[d] + 1 + one_to_three(rng) * (spatial == 3 ? 1 : 3));
    }
    const bool ceil_mode = trial % 4 < 2;
    const Attributes a{{"kernel_shape", kernel},
                       {"strides", strides},
                       {"pads", pads},
                       {"dilations", dilations},
                       {"ceil_mode", int64_t{ceil_mode ? 1 : 0}}};
    const Ints y = pooled_sizes(x, kernel, strides, pads, dilations, ceil_mode);
    const Tensor input = tied_tensor(rng, x);
    const std::string label = "trial " + std::to_string(trial);
    expect_agree({"MaxPool", "", 19, a, {input}, {f32(y)}}, label, "MaxPoolKernel", false, 0, 0);
    expect_agree({"MaxPoolGrad", kTrainingDomain, 19, a, {tied_tensor(rng, y), input}, {f32(x)}}, label,
                 "MaxPoolGradKernel", false, 0, 0);
  }
  // The Indices output is the reference kernel's.
  const Attributes pool2{{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}};
  const Case indices{
      "MaxPool", "", 17, pool2, {random_tensor(rng, {1, 2, 4, 4})}, {f32({1, 2, 2, 2}), {DType::Int64, {1, 2, 2, 2}}}};
  EXPECT_FALSE(is_own(*prepare(indices, ""), "MaxPoolKernel"));
}
