// oneDNN pooling, batch norm, eltwise, softmax, LRN and layer norm kernels against the reference
// kernels: seeded random shapes and attribute variants, float32, |onednn - reference| <= atol + rtol·|ref|
// with rtol 1e-4 and atol 1e-5; eltwise with rtol 1e-5 and atol 1e-6 (oneDNN's vectorised exp, tanh and
// erf are approximations: Gelu's and Softplus's tails miss 1e-5 relative, never 1e-6 absolute).
// MaxPool and Clip are not oneDNN's (kernels/cpu/max_pool.cc, tested in cpu_losses_norm_test;
// kernels/cpu/elementwise_unary.cc, in cpu_elementwise_test).
// Configurations that fall back to the reference kernel (even LRN
// sizes, broadcast LayerNorm scale, ...) run through the same comparison.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kernels/kernel.h"
#include "kernels/onednn/primitive_kernel.h"
#include "kernels/onednn/primitive_sequence_kernel.h"
#include "tests/reference_kernel_call.h"

using namespace onnxtrain;

namespace {

using Ints = std::vector<int64_t>;

using Case = testing_support::KernelCase;

Tensor random_tensor(std::mt19937& rng, Ints sizes, float lo = -2, float hi = 2) {
  Tensor t(DType::Float32, std::move(sizes));
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

TensorDesc f32(Ints sizes) { return {DType::Float32, std::move(sizes)}; }

// Which kernel the onednn factory returned: a primitive or the reference fallback.
enum class Path { Primitive, Fallback, Either };
int primitives = 0, fallbacks = 0;

std::vector<Tensor> run(const Case& c, const std::string& implementation, Path* path = nullptr) {
  const KernelSpec spec{c.op,      "",         c.opset, c.attributes, testing_support::input_descs(c.inputs),
                        c.outputs, "test_node"};
  const KernelEntry* entry = KernelRegistry::builtin().find("", c.op, DeviceKind::Cpu, DType::Float32, implementation);
  if (!entry) throw std::runtime_error("no " + implementation + " kernel for " + c.op);
  std::unique_ptr<Kernel> kernel = entry->prepare(spec);
  // A primitive, or loops of the onednn implementation's own (ReportsImplementation: plain_batch_norm.h).
  const bool primitive = dynamic_cast<onednn::PrimitiveKernel*>(kernel.get()) ||
                         dynamic_cast<onednn::PrimitiveSequenceKernel*>(kernel.get()) ||
                         dynamic_cast<onednn::ReportsImplementation*>(kernel.get());
  if (path) *path = primitive ? Path::Primitive : Path::Fallback;
  return testing_support::run_prepared(*kernel, c.inputs, c.outputs);
}

// Runs both implementations and compares every present output.
// `expected` says whether the onednn factory must build a primitive or fall back.
void expect_agree(const Case& c, const std::string& label, Path expected = Path::Primitive, double rtol = 1e-4,
                  double atol = 1e-5) {
  SCOPED_TRACE(c.op + " " + label);
  Path path = Path::Either;
  const std::vector<Tensor> ours = run(c, "onednn", &path);
  (path == Path::Primitive ? primitives : fallbacks)++;
  if (expected != Path::Either) {
    EXPECT_EQ(path == Path::Primitive, expected == Path::Primitive) << "kernel path";
  }
  const std::vector<Tensor> reference = run(c, "reference");
  for (size_t o = 0; o < ours.size(); ++o) {
    if (!c.outputs[o].present()) continue;
    if (c.outputs[o].dtype == DType::Int64) {
      EXPECT_TRUE(std::equal(ours[o].data<int64_t>().begin(), ours[o].data<int64_t>().end(),
                             reference[o].data<int64_t>().begin()));
      continue;
    }
    const float* a = ours[o].data<float>().data();
    const float* b = reference[o].data<float>().data();
    int failures = 0;
    for (int64_t i = 0; i < ours[o].numel() && failures < 5; ++i) {
      const bool same = std::isnan(b[i])   ? std::isnan(a[i])
                        : std::isinf(b[i]) ? a[i] == b[i]
                                           : std::fabs(a[i] - b[i]) <= atol + rtol * std::fabs(b[i]);
      if (!same) {
        ADD_FAILURE() << "output " << o << " element " << i << ": onednn " << a[i] << ", reference " << b[i];
        ++failures;
      }
    }
  }
}

int64_t pick(std::mt19937& rng, int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

Ints random_sizes(std::mt19937& rng, size_t rank, int64_t lo, int64_t hi) {
  Ints sizes(rank);
  for (int64_t& s : sizes) s = pick(rng, lo, hi);
  return sizes;
}

TEST(OnednnNn, DefaultFindPrefersOnednnForFloat32) {
  for (const char* op : {"MaxPool", "GlobalAveragePool"})  // oneDNN's plain-layout pooling is scalar code
    EXPECT_EQ(KernelRegistry::builtin().find("", op, DeviceKind::Cpu, DType::Float32)->implementation, "cpu") << op;
  for (const char* op :
       {"AveragePool", "GlobalMaxPool", "BatchNormalization", "Relu", "LeakyRelu", "Elu", "Sigmoid", "Tanh", "Sqrt",
        "Exp", "Abs", "Gelu", "HardSwish", "Softplus", "Softmax", "LogSoftmax", "LRN", "LayerNormalization"}) {
    const KernelEntry* entry = KernelRegistry::builtin().find("", op, DeviceKind::Cpu, DType::Float32);
    ASSERT_NE(entry, nullptr) << op;
    EXPECT_EQ(entry->implementation, "onednn") << op;
    const KernelEntry* f64 = KernelRegistry::builtin().find("", op, DeviceKind::Cpu, DType::Float64);
    ASSERT_NE(f64, nullptr) << op;
    EXPECT_EQ(f64->implementation, "reference") << op;
  }
}

TEST(OnednnNn, EltwiseMatchesReference) {
  std::mt19937 rng(11);
  const std::vector<std::pair<std::string, Attributes>> ops = {{"Relu", {}},
                                                               {"LeakyRelu", {}},
                                                               {"LeakyRelu", {{"alpha", 0.3}}},
                                                               {"Elu", {}},
                                                               {"Elu", {{"alpha", 0.5}}},
                                                               {"Sigmoid", {}},
                                                               {"Tanh", {}},
                                                               {"Sqrt", {}},
                                                               {"Exp", {}},
                                                               {"Abs", {}},
                                                               {"Gelu", {}},
                                                               {"Gelu", {{"approximate", std::string("tanh")}}},
                                                               {"HardSwish", {}},
                                                               {"Softplus", {}}};
  for (int trial = 0; trial < 3; ++trial) {
    for (const auto& [op, attributes] : ops) {
      const Ints sizes = random_sizes(rng, static_cast<size_t>(pick(rng, 1, 4)), 1, 9);
      const bool positive = op == "Sqrt";
      Case c{op, 20, attributes, {random_tensor(rng, sizes, positive ? 0.01f : -6, 6)}, {f32(sizes)}};
      expect_agree(c, "trial " + std::to_string(trial), Path::Primitive, 1e-5, 1e-6);
    }
  }
}

// ONNX's pooled size, PyTorch's ceil_mode rule included (a last window must start inside input or left pad).
int64_t pooled(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil) {
  const int64_t span = in + pb + pe - ((k - 1) * d + 1);
  int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (out - 1) * s >= in + pb) --out;
  return out;
}

TEST(OnednnNn, PoolingMatchesReference) {
  std::mt19937 rng(23);
  const int primitives_before = primitives;
  for (int trial = 0; trial < 60; ++trial) {
    const size_t spatial = static_cast<size_t>(1 + trial % 3);
    Ints x{pick(rng, 1, 3), pick(rng, 1, 4)}, kernel, strides, pads(2 * spatial);
    const bool ceil = pick(rng, 0, 1) == 1;
    for (size_t d = 0; d < spatial; ++d) {
      kernel.push_back(pick(rng, 1, 3));
      strides.push_back(pick(rng, 1, 3));
      pads[d] = pick(rng, 0, kernel[d] - 1);
      pads[d + spatial] = pick(rng, 0, kernel[d] - 1);
      x.push_back(pick(rng, kernel[d], spatial == 3 ? 6 : 10));
    }
    Ints y{x[0], x[1]};
    for (size_t d = 0; d < spatial; ++d)
      y.push_back(pooled(x[2 + d], kernel[d], strides[d], 1, pads[d], pads[d + spatial], ceil));
    const Attributes a{{"kernel_shape", kernel},
                       {"strides", strides},
                       {"pads", pads},
                       {"ceil_mode", int64_t{ceil}},
                       {"count_include_pad", pick(rng, 0, 1)}};
    expect_agree({"AveragePool", 19, a, {random_tensor(rng, x)}, {f32(y)}}, "trial " + std::to_string(trial),
                 Path::Either);
  }
  // Only count_include_pad with a ceil_mode overhang falls back among these.
  EXPECT_GT(primitives - primitives_before, 40) << "random pooling cases that ran on oneDNN";
  for (size_t rank : {3, 4, 5}) {
    const Ints sizes = random_sizes(rng, rank, 1, 6);
    Ints y(rank, 1);
    y[0] = sizes[0];
    y[1] = sizes[1];
    expect_agree({"GlobalMaxPool", 1, {}, {random_tensor(rng, sizes)}, {f32(y)}}, "rank " + std::to_string(rank));
  }
}

TEST(OnednnNn, BatchNormalizationMatchesReference) {
  std::mt19937 rng(37);
  for (int trial = 0; trial < 16; ++trial) {
    const Ints x = random_sizes(rng, static_cast<size_t>(2 + trial % 4), 1, 6);
    const Ints c{x[1]};
    const int mode = trial % 3;  // 0: inference, 1: training (opset 15), 2: training (opset 9, 5 outputs)
    Attributes a{{"epsilon", 1e-3}, {"momentum", 0.8}};
    if (mode == 1) a["training_mode"] = int64_t{1};
    std::vector<TensorDesc> outputs{f32(x)};
    if (mode == 1) outputs.insert(outputs.end(), {f32(c), f32(c)});
    if (mode == 2) outputs.insert(outputs.end(), {f32(c), f32(c), f32(c), f32(c)});
    Case k{"BatchNormalization",
           mode == 2 ? 9 : 15,
           a,
           {random_tensor(rng, x), random_tensor(rng, c), random_tensor(rng, c), random_tensor(rng, c),
            random_tensor(rng, c, 0.1f, 2)},
           outputs};
    expect_agree(k, "trial " + std::to_string(trial) + " mode " + std::to_string(mode));
  }
}

TEST(OnednnNn, SoftmaxMatchesReference) {
  std::mt19937 rng(41);
  for (int trial = 0; trial < 24; ++trial) {
    const auto rank = static_cast<int64_t>(1 + trial % 4);
    const Ints x = random_sizes(rng, static_cast<size_t>(rank), 1, 9);
    const int opset = trial % 2 == 0 ? 11 : 13;
    const Attributes a{{"axis", pick(rng, -rank, rank - 1)}};
    for (const char* op : {"Softmax", "LogSoftmax"})
      expect_agree({op, opset, a, {random_tensor(rng, x, -8, 8)}, {f32(x)}}, "trial " + std::to_string(trial));
  }
}

// Softmax over the last axis runs on kernels/cpu/row_softmax.h where the CPU has AVX-512: rows of whole
// vectors, of a masked tail and of both (attention's 65), -inf scores (masked positions), a row that is
// all -inf but one, and scores far from 0; one thread and two give the same bits.
TEST(OnednnNn, SoftmaxOverRowsMatchesReference) {
  std::mt19937 rng(53);
  for (const int64_t n : {1, 15, 16, 17, 65, 1000}) {
    Tensor x = random_tensor(rng, {3, 37, n}, -30, 30);
    float* v = x.data<float>().data();
    for (int64_t i = 0; i < x.numel(); i += 7) v[i] = -INFINITY;
    for (int64_t i = 0; i < n; ++i) v[i] = i == n / 2 ? 80.0f : -INFINITY;  // row 0: one finite score
    for (int64_t i = n; i < 2 * n; ++i) v[i] += 1000.0f;                    // row 1: far from 0
    v[n] = 1000.0f;
    const Case c{"Softmax", 13, {{"axis", int64_t{-1}}}, {x}, {f32({3, 37, n})}};
    expect_agree(c, "n " + std::to_string(n), Path::Primitive, 1e-5, 1e-7);
    omp_set_num_threads(1);
    const std::vector<Tensor> one = run(c, "onednn");
    omp_set_num_threads(2);
    const std::vector<Tensor> two = run(c, "onednn");
    EXPECT_EQ(std::memcmp(one[0].data<float>().data(), two[0].data<float>().data(), one[0].nbytes()), 0)
        << "n " << n;  // bits: a row of one -inf is NaN
  }
}

TEST(OnednnNn, LrnMatchesReference) {
  std::mt19937 rng(43);
  for (int trial = 0; trial < 12; ++trial) {
    const Ints x = random_sizes(rng, static_cast<size_t>(3 + trial % 3), 1, 7);
    const int64_t size = pick(rng, 1, 6);
    const Attributes a{{"size", size}, {"alpha", 0.3}, {"beta", 0.6}, {"bias", 1.5}};
    expect_agree({"LRN", 13, a, {random_tensor(rng, x)}, {f32(x)}}, "trial " + std::to_string(trial),
                 size % 2 == 0 ? Path::Fallback : Path::Primitive);
  }
}

TEST(OnednnNn, LayerNormalizationMatchesReference) {
  std::mt19937 rng(47);
  for (int trial = 0; trial < 16; ++trial) {
    const auto rank = static_cast<int64_t>(1 + trial % 4);
    const Ints x = random_sizes(rng, static_cast<size_t>(rank), 1, 9);
    const int64_t axis = pick(rng, -rank, rank - 1);
    const int64_t a = axis < 0 ? axis + rank : axis;
    Ints normalized(x.begin() + a, x.end()), stats = x;
    for (int64_t d = a; d < rank; ++d) stats[d] = 1;
    if (trial % 5 == 4) normalized.front() = 1;  // broadcast Scale: reference fallback
    const bool bias = trial % 2 == 0;
    std::vector<TensorDesc> outputs{f32(x)};
    if (trial % 3 != 0) outputs.insert(outputs.end(), {f32(stats), f32(stats)});
    if (trial % 3 == 2) outputs[1] = TensorDesc{};  // InvStdDev alone
    Case c{"LayerNormalization",
           17,
           {{"axis", axis}, {"epsilon", 1e-4}},
           {random_tensor(rng, x), random_tensor(rng, normalized), bias ? random_tensor(rng, normalized) : Tensor()},
           outputs};
    expect_agree(c, "trial " + std::to_string(trial), trial % 5 == 4 ? Path::Either : Path::Primitive);
  }
}

}  // namespace
