// The "cpu" elementwise kernels (kernels/cpu/elementwise_*.cc) against the reference kernels: seeded random
// inputs, shapes big enough for several threads and with odd innermost sizes (vector-loop tails), every
// broadcast pattern the BroadcastPlan distinguishes (same shape, scalar, row, column, both sides, 5-D,
// broadcast inside the innermost dim), NaNs for Max/Min, ties for the comparisons, attributes for Selu,
// HardSigmoid, and Dropout's Philox masks bit for bit. Also checks that the registry's default is really "cpu".
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/cpu/elementwise_isa.h"
#include "kernels/kernel.h"
#include "tests/reference_kernel_call.h"

using namespace onnxtrain;

namespace {

using Ints = std::vector<int64_t>;

using Case = testing_support::KernelCase;

std::mt19937& rng() {
  static std::mt19937 r(1234);
  return r;
}

Tensor random_float(Ints sizes, float lo = -2, float hi = 2) {
  Tensor t(DType::Float32, std::move(sizes));
  std::uniform_real_distribution<float> dist(lo, hi);
  auto* p = reinterpret_cast<float*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng());
  return t;
}

// Small integers as floats: the comparisons see ties.
Tensor random_ties(Ints sizes) {
  Tensor t(DType::Float32, std::move(sizes));
  std::uniform_int_distribution<int> dist(-2, 2);
  auto* p = reinterpret_cast<float*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(dist(rng()));
  return t;
}

// Bytes 0, 1 and 2 (any non-zero byte is true).
Tensor random_bool(Ints sizes) {
  Tensor t(DType::Bool, std::move(sizes));
  std::uniform_int_distribution<int> dist(0, 2);
  auto* p = reinterpret_cast<uint8_t*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<uint8_t>(dist(rng()));
  return t;
}

Tensor random_bits(DType dtype, Ints sizes) {
  Tensor t(dtype, std::move(sizes));
  auto* p = reinterpret_cast<uint8_t*>(t.raw());
  for (size_t i = 0; i < static_cast<size_t>(t.numel()) * dtype_size(dtype); ++i) p[i] = rng()() & 0x7f;
  return t;
}

Tensor scalar_float(float v, Ints sizes = {}) {
  Tensor t(DType::Float32, std::move(sizes));
  reinterpret_cast<float*>(t.raw())[0] = v;
  return t;
}

Tensor scalar_bool(bool v) {
  Tensor t(DType::Bool, {});
  reinterpret_cast<uint8_t*>(t.raw())[0] = v;
  return t;
}

Ints broadcast(const Ints& a, const Ints& b) {
  const size_t rank = std::max(a.size(), b.size());
  Ints out(rank);
  for (size_t k = 0; k < rank; ++k) {
    const int64_t da = k < rank - a.size() ? 1 : a[k - (rank - a.size())];
    const int64_t db = k < rank - b.size() ? 1 : b[k - (rank - b.size())];
    out[k] = da == 1 ? db : da;
  }
  return out;
}

DType dtype_of(const Case& c) {
  for (const Tensor& t : c.inputs)
    if (t.dtype() != DType::Undefined) return t.dtype();
  return DType::Undefined;
}

std::vector<Tensor> run(const Case& c, const std::string& implementation, Kernel* prepared = nullptr,
                        uint64_t run_index = 0) {
  const KernelSpec spec{c.op,      c.domain,   c.opset, c.attributes, testing_support::input_descs(c.inputs),
                        c.outputs, "test_node"};
  std::unique_ptr<Kernel> owned;
  Kernel* kernel = prepared;
  if (!kernel) {
    const KernelEntry* entry =
        KernelRegistry::builtin().find(c.domain, c.op, DeviceKind::Cpu, dtype_of(c), implementation);
    if (!entry) throw std::runtime_error("no " + implementation + " kernel for " + c.op);
    owned = entry->prepare(spec);
    kernel = owned.get();
  }
  return testing_support::run_prepared(*kernel, c.inputs, c.outputs, run_index);
}

// Outputs equal: bytes for non-float outputs; floats within rtol (0: exactly), NaN where the reference is NaN.
void expect_agree(const Case& c, double rtol = 0) {
  SCOPED_TRACE(c.op);
  const KernelEntry* entry = KernelRegistry::builtin().find(c.domain, c.op, DeviceKind::Cpu, dtype_of(c));
  ASSERT_NE(entry, nullptr);
  const std::vector<Tensor> ours = run(c, "cpu");
  const std::vector<Tensor> reference = run(c, "reference");
  for (size_t o = 0; o < ours.size(); ++o) {
    if (!c.outputs[o].present()) continue;
    if (c.outputs[o].dtype != DType::Float32) {
      const size_t bytes = static_cast<size_t>(ours[o].numel()) * dtype_size(ours[o].dtype());
      if (bytes > 0) {
        EXPECT_EQ(std::memcmp(ours[o].raw(), reference[o].raw(), bytes), 0) << "output " << o;
      }
      continue;
    }
    const auto* a = reinterpret_cast<const float*>(ours[o].raw());
    const auto* b = reinterpret_cast<const float*>(reference[o].raw());
    int64_t bad = 0;
    for (int64_t i = 0; i < ours[o].numel(); ++i) {
      const bool ok =
          std::isnan(b[i]) ? std::isnan(a[i]) : a[i] == b[i] || std::fabs(a[i] - b[i]) <= rtol * std::fabs(b[i]);
      if (!ok && bad++ < 5) ADD_FAILURE() << "output " << o << " element " << i << ": " << a[i] << " vs " << b[i];
    }
    EXPECT_EQ(bad, 0);
  }
}

// Log, Erf, Selu's expm1 and Pow come from libmvec, within 4 ulp of libm (the reference).
constexpr double kVectorMathRtol = 1e-6;

// The broadcast patterns of two inputs, with odd innermost sizes and enough elements for several threads.
const std::vector<std::pair<Ints, Ints>> kPairs = {
    {{64, 16, 129}, {64, 16, 129}},          // same shape: one contiguous run
    {{64, 16, 129}, {}},                     // scalar
    {{}, {3, 70001}},                        // scalar on the left
    {{64, 16, 129}, {129}},                  // row
    {{32, 16, 33, 33}, {16, 1, 1}},          // per-channel (NCHW bias)
    {{32, 16, 33, 33}, {32, 16, 1, 1}},      // broadcast innermost
    {{300, 1, 257}, {1, 200, 1}},            // both sides
    {{3, 1, 5, 7, 9, 1}, {4, 1, 7, 1, 11}},  // 6-D, alternating
    {{100003, 3}, {100003, 1}},              // tiny inner, column
    {{1, 1, 1}, {1}},                        // all ones
    {{0, 5}, {5}},                           // empty
    // 11 dims left after coalescing, more than the plan takes: the reference kernel
    {{2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 3}, {1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1}},
};

// Every test runs twice: with the AVX2 builds of the loops (where the CPU has AVX2) and with the baseline
// (SSE2) builds.
class CpuElementwise : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { cpu::elementwise::use_avx2 = GetParam() && cpu::elementwise::cpu_has_avx2(); }
  void TearDown() override { cpu::elementwise::use_avx2 = cpu::elementwise::cpu_has_avx2(); }
};

INSTANTIATE_TEST_SUITE_P(Isa, CpuElementwise, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "Avx2" : "Baseline"; });

TEST_P(CpuElementwise, RegistryPicksCpu) {
  for (const char* op : {"Add",         "Sub",        "Mul",         "Div",     "Pow",
                         "Max",         "Min",        "Sum",         "Mean",    "PRelu",
                         "Equal",       "Less",       "LessOrEqual", "Greater", "GreaterOrEqual",
                         "Neg",         "Reciprocal", "Log",         "Erf",     "Selu",
                         "HardSigmoid", "Dropout",    "Clip"}) {
    const KernelEntry* e = KernelRegistry::builtin().find("", op, DeviceKind::Cpu, DType::Float32);
    ASSERT_NE(e, nullptr) << op;
    EXPECT_EQ(e->implementation, "cpu") << op;
  }
  for (const char* op : {"And", "Where"}) {
    const KernelEntry* e = KernelRegistry::builtin().find("", op, DeviceKind::Cpu, DType::Bool);
    ASSERT_NE(e, nullptr) << op;
    EXPECT_EQ(e->implementation, "cpu") << op;
  }
  const KernelEntry* e = KernelRegistry::builtin().find("ai.onnxtrain", "DropoutGrad", DeviceKind::Cpu, DType::Float32);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->implementation, "cpu");
}

TEST_P(CpuElementwise, Arithmetic) {
  for (const auto& [a, b] : kPairs) {
    SCOPED_TRACE(::testing::PrintToString(a) + " " + ::testing::PrintToString(b));
    const Ints out = broadcast(a, b);
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean"}) {
      expect_agree({.op = op, .inputs = {random_float(a), random_float(b)}, .outputs = {{DType::Float32, out}}});
    }
    // Pow: positive bases, any exponent
    expect_agree(
        {.op = "Pow", .inputs = {random_float(a, 0.1f, 3), random_float(b)}, .outputs = {{DType::Float32, out}}},
        kVectorMathRtol);
  }
}

TEST_P(CpuElementwise, PowScalarExponents) {
  for (float e : {2.0f, 1.0f, 0.5f, 3.0f, -1.0f}) {
    SCOPED_TRACE(e);  // x*x for e = 2 may differ from std::pow by an ulp
    expect_agree(
        {.op = "Pow", .inputs = {random_float({64, 1001}), scalar_float(e)}, .outputs = {{DType::Float32, {64, 1001}}}},
        1e-6);
    expect_agree({.op = "Pow",
                  .inputs = {random_float({64, 1001}), scalar_float(e, {1, 1})},
                  .outputs = {{DType::Float32, {64, 1001}}}},
                 1e-6);
  }
  // Float32 base, int64 exponent (opset 12+): the reference kernel's path
  Tensor exponent(DType::Int64, {});
  reinterpret_cast<int64_t*>(exponent.raw())[0] = 3;
  expect_agree({.op = "Pow", .inputs = {random_float({7, 9}), exponent}, .outputs = {{DType::Float32, {7, 9}}}});
}

TEST_P(CpuElementwise, MaxMinPropagateNaN) {
  Tensor a = random_float({1000, 37}), b = random_float({37});
  auto* pa = reinterpret_cast<float*>(a.raw());
  for (int64_t i = 0; i < a.numel(); i += 97) pa[i] = NAN;
  reinterpret_cast<float*>(b.raw())[5] = NAN;
  for (const char* op : {"Max", "Min"})
    expect_agree({.op = op, .inputs = {a, b}, .outputs = {{DType::Float32, {1000, 37}}}});
}

TEST_P(CpuElementwise, Variadic) {
  const std::vector<std::vector<Ints>> shapes = {
      {{64, 16, 129}},
      {{64, 16, 129}, {64, 16, 129}, {64, 16, 129}},
      {{64, 1, 129}, {16, 1}, {129}, {}},
      {{5}, {3, 1}, {2, 1, 1}, {2, 3, 5}},
  };
  for (const auto& list : shapes) {
    Ints out;
    for (const Ints& s : list) out = broadcast(out, s);
    for (const char* op : {"Max", "Min", "Sum", "Mean"}) {
      Case c{.op = op, .outputs = {{DType::Float32, out}}};
      for (const Ints& s : list) c.inputs.push_back(random_float(s));
      expect_agree(c);
    }
  }
}

TEST_P(CpuElementwise, PRelu) {
  for (const Ints& slope : {Ints{}, Ints{1}, Ints{33}, Ints{16, 1, 1}, Ints{32, 16, 33, 33}, Ints{1, 16, 1, 33}}) {
    expect_agree({.op = "PRelu",
                  .inputs = {random_float({32, 16, 33, 33}), random_float(slope)},
                  .outputs = {{DType::Float32, {32, 16, 33, 33}}}});
  }
}

TEST_P(CpuElementwise, Comparisons) {
  for (const auto& [a, b] : kPairs) {
    const Ints out = broadcast(a, b);
    for (const char* op : {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"}) {
      expect_agree({.op = op, .inputs = {random_ties(a), random_ties(b)}, .outputs = {{DType::Bool, out}}});
    }
  }
  Tensor a = random_ties({1001}), b = random_ties({1001});
  reinterpret_cast<float*>(a.raw())[3] = NAN;
  for (const char* op : {"Equal", "Less", "GreaterOrEqual"})
    expect_agree({.op = op, .inputs = {a, b}, .outputs = {{DType::Bool, {1001}}}});
}

TEST_P(CpuElementwise, And) {
  for (const auto& [a, b] : kPairs) {
    expect_agree(
        {.op = "And", .inputs = {random_bool(a), random_bool(b)}, .outputs = {{DType::Bool, broadcast(a, b)}}});
  }
}

TEST_P(CpuElementwise, Where) {
  const std::vector<std::vector<Ints>> shapes = {
      {{64, 16, 129}, {64, 16, 129}, {64, 16, 129}},
      {{64, 16, 129}, {}, {129}},
      {{}, {64, 16, 129}, {64, 16, 129}},
      {{64, 1, 1}, {64, 16, 129}, {}},
      {{16, 129}, {64, 1, 129}, {64, 16, 1}},
      {{3, 1, 5, 7, 9, 1}, {4, 1, 7, 1, 11}, {1}},
  };
  for (DType dtype : {DType::Float32, DType::Int64, DType::Bool, DType::Float16, DType::Float64}) {
    for (const auto& s : shapes) {
      const Ints out = broadcast(broadcast(s[0], s[1]), s[2]);
      expect_agree({.op = "Where",
                    .inputs = {random_bool(s[0]), random_bits(dtype, s[1]), random_bits(dtype, s[2])},
                    .outputs = {{dtype, out}}});
    }
  }
}

TEST_P(CpuElementwise, Unary) {
  for (const Ints& sizes : {Ints{64, 16, 129}, Ints{7}, Ints{}, Ints{0, 3}}) {
    for (const char* op : {"Neg", "Reciprocal", "HardSigmoid"}) {
      expect_agree({.op = op, .inputs = {random_float(sizes, -6, 6)}, .outputs = {{DType::Float32, sizes}}});
    }
    for (const char* op : {"Erf", "Selu"}) {
      expect_agree({.op = op, .inputs = {random_float(sizes, -6, 6)}, .outputs = {{DType::Float32, sizes}}},
                   kVectorMathRtol);
    }
    expect_agree({.op = "Log", .inputs = {random_float(sizes, 0, 10)}, .outputs = {{DType::Float32, sizes}}},
                 kVectorMathRtol);
  }
  expect_agree({.op = "Selu",
                .attributes = {{"alpha", 2.0}, {"gamma", 3.0}},
                .inputs = {random_float({1001})},
                .outputs = {{DType::Float32, {1001}}}},
               kVectorMathRtol);
  // Special values through the vector math: zeros, infinities, NaN, negatives (Log), tails of every length.
  for (int64_t n = 1; n <= 19; ++n) {
    Tensor x = random_float({n}, -3, 3);
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, 1e-30f, 88.0f, -100.0f};
    for (int64_t i = 0; i < n; ++i)
      if (i % 2 == 0) reinterpret_cast<float*>(x.raw())[i] = specials[(i / 2) % 10];
    for (const char* op : {"Log", "Erf", "Selu"})
      expect_agree({.op = op, .inputs = {x}, .outputs = {{DType::Float32, {n}}}}, kVectorMathRtol);
    expect_agree({.op = "Pow", .inputs = {x, random_float({n}, -3, 3)}, .outputs = {{DType::Float32, {n}}}},
                 kVectorMathRtol);
  }
  expect_agree({.op = "HardSigmoid",
                .attributes = {{"alpha", 0.3}, {"beta", 0.4}},
                .inputs = {random_float({1001}, -5, 5)},
                .outputs = {{DType::Float32, {1001}}}});
}

// Clip: bounds as attributes (opset 6) and as runtime inputs (opset 13: both, min only, max only, none,
// min above max), over values with NaN and infinities.
TEST_P(CpuElementwise, Clip) {
  Tensor x = random_float({1001}, -8, 8);
  const float specials[] = {NAN, INFINITY, -INFINITY, 6.0f, 0.0f};
  for (int64_t i = 0; i < 1001; i += 97) reinterpret_cast<float*>(x.raw())[i] = specials[(i / 97) % 5];
  const TensorDesc out{DType::Float32, {1001}};
  expect_agree({.op = "Clip", .opset = 6, .attributes = {{"min", 0.0}, {"max", 6.0}}, .inputs = {x}, .outputs = {out}});
  expect_agree({.op = "Clip", .opset = 6, .attributes = {{"max", -1.5}}, .inputs = {x}, .outputs = {out}});
  for (const auto& [lo, hi] : std::vector<std::pair<Tensor, Tensor>>{{scalar_float(0), scalar_float(6)},
                                                                     {scalar_float(-2.5f), Tensor()},
                                                                     {Tensor(), scalar_float(1)},
                                                                     {Tensor(), Tensor()},
                                                                     {scalar_float(3), scalar_float(-3)}}) {
    expect_agree({.op = "Clip", .opset = 13, .inputs = {x, lo, hi}, .outputs = {out}});
  }
}

// Dropout draws the reference kernel's masks bit for bit, run after run; a run's mask depends on its
// run index only (a fresh mask per index, the same one when an index comes again).
TEST_P(CpuElementwise, DropoutMatchesReferenceRng) {
  const Ints sizes = {64, 16, 129};
  for (double ratio : {0.5, 0.1, 0.0, 0.9}) {
    for (bool training : {true, false}) {
      Case c{.op = "Dropout",
             .opset = 13,
             .attributes = {{"seed", int64_t{7}}},
             .inputs = {random_float(sizes), scalar_float(static_cast<float>(ratio)), scalar_bool(training)},
             .outputs = {{DType::Float32, sizes}, {DType::Bool, sizes}}};
      KernelSpec spec{c.op, "", c.opset, c.attributes, {}, c.outputs, "n"};
      for (const Tensor& t : c.inputs) spec.inputs.push_back({t.dtype(), t.sizes()});
      auto ours = KernelRegistry::builtin().find("", "Dropout", DeviceKind::Cpu, DType::Float32)->prepare(spec);
      auto reference =
          KernelRegistry::builtin().find("", "Dropout", DeviceKind::Cpu, DType::Float32, "reference")->prepare(spec);
      std::vector<Tensor> first;
      for (uint64_t round : {0, 1, 2, 0}) {
        const std::vector<Tensor> a = run(c, "", ours.get(), round), b = run(c, "", reference.get(), round);
        for (size_t o = 0; o < 2; ++o) {
          const size_t bytes = static_cast<size_t>(a[o].numel()) * dtype_size(a[o].dtype());
          EXPECT_EQ(std::memcmp(a[o].raw(), b[o].raw(), bytes), 0) << "ratio " << ratio << " round " << round;
        }
        const size_t mask_bytes = static_cast<size_t>(a[1].numel());
        if (first.empty()) {
          first = a;
        } else if (training && ratio > 0) {  // index 0 again: its mask again; another index: another mask
          EXPECT_EQ(round == 0, std::memcmp(a[1].raw(), first[1].raw(), mask_bytes) == 0) << "ratio " << ratio;
        }
      }
    }
  }
  // Odd sizes: the last Philox block's second draw goes unused; 131075 elements split across two or more
  // threads at an odd element, where a thread's range starts with the second draw of a block.
  for (const Ints& odd : {Ints{7}, Ints{311}, Ints{513}, Ints{1}, Ints{131075}}) {
    Case c{.op = "Dropout",
           .opset = 13,
           .attributes = {{"seed", int64_t{99}}},
           .inputs = {random_float(odd), scalar_float(0.5f), scalar_bool(true)},
           .outputs = {{DType::Float32, odd}, {DType::Bool, odd}}};
    KernelSpec spec{c.op, "", c.opset, c.attributes, {}, c.outputs, "n"};
    for (const Tensor& t : c.inputs) spec.inputs.push_back({t.dtype(), t.sizes()});
    auto ours = KernelRegistry::builtin().find("", "Dropout", DeviceKind::Cpu, DType::Float32)->prepare(spec);
    auto reference =
        KernelRegistry::builtin().find("", "Dropout", DeviceKind::Cpu, DType::Float32, "reference")->prepare(spec);
    for (uint64_t round = 0; round < (odd[0] > 1000 ? 3 : 200); ++round) {
      const std::vector<Tensor> a = run(c, "", ours.get(), round), b = run(c, "", reference.get(), round);
      ASSERT_EQ(std::memcmp(a[1].raw(), b[1].raw(), static_cast<size_t>(a[1].numel())), 0) << "round " << round;
      ASSERT_EQ(std::memcmp(a[0].raw(), b[0].raw(), static_cast<size_t>(a[0].numel()) * 4), 0) << "round " << round;
    }
  }
  // Without the mask output, and the old opset's float mask (inference only).
  expect_agree({.op = "Dropout",
                .opset = 13,
                .inputs = {random_float(sizes), scalar_float(0.3f), scalar_bool(true)},
                .outputs = {{DType::Float32, sizes}}});
  expect_agree({.op = "Dropout",
                .opset = 7,
                .attributes = {{"ratio", 0.3}},
                .inputs = {random_float(sizes)},
                .outputs = {{DType::Float32, sizes}, {DType::Float32, sizes}}});
}

// Element i's draw depends on (seed, run index, i) alone, not on the tensor's size: the first k mask
// entries of a larger tensor are the mask of a k-element tensor, on the cpu and the reference kernel.
TEST_P(CpuElementwise, DropoutMaskOfAPrefix) {
  const int64_t large = 131075;  // several threads' ranges, one of them starting at an odd element
  auto mask = [](int64_t count, const std::string& implementation, uint64_t run_index) {
    const Case c{.op = "Dropout",
                 .opset = 13,
                 .attributes = {{"seed", int64_t{5}}},
                 .inputs = {random_float({count}), scalar_float(0.4f), scalar_bool(true)},
                 .outputs = {{DType::Float32, {count}}, {DType::Bool, {count}}}};
    const std::vector<Tensor> out = run(c, implementation, nullptr, run_index);
    const auto* m = reinterpret_cast<const uint8_t*>(out[1].raw());
    return std::vector<uint8_t>(m, m + count);
  };
  for (uint64_t run_index : {uint64_t{0}, uint64_t{9}}) {
    const std::vector<uint8_t> whole = mask(large, "", run_index);
    EXPECT_EQ(whole, mask(large, "reference", run_index));
    for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{512}, int64_t{65537}}) {
      const std::vector<uint8_t> prefix(whole.begin(), whole.begin() + k);
      EXPECT_EQ(mask(k, "", run_index), prefix) << "k " << k << " run " << run_index;
      EXPECT_EQ(mask(k, "reference", run_index), prefix) << "k " << k << " run " << run_index;
    }
  }
}

TEST_P(CpuElementwise, DropoutGrad) {
  const Ints sizes = {64, 16, 129};
  Tensor float_mask = random_bits(DType::Bool, sizes);
  Tensor as_float(DType::Float32, sizes);
  for (int64_t i = 0; i < as_float.numel(); ++i)
    reinterpret_cast<float*>(as_float.raw())[i] = reinterpret_cast<uint8_t*>(float_mask.raw())[i] % 2;
  for (const Tensor& mask : {random_bool(sizes), as_float}) {
    for (const Tensor& ratio : {Tensor(), scalar_float(0.25f)}) {
      for (const Tensor& training : {Tensor(), scalar_bool(true), scalar_bool(false)}) {
        expect_agree({.op = "DropoutGrad",
                      .opset = 1,
                      .inputs = {random_float(sizes), mask, ratio, training},
                      .outputs = {{DType::Float32, sizes}},
                      .domain = "ai.onnxtrain"});
      }
    }
  }
}

// ActivationGrad: the cpu kernel for every activation, and the registry's default (oneDNN, which hands
// Selu, Erf and HardSigmoid to the cpu kernel) against the reference.
TEST_P(CpuElementwise, ActivationGrad) {
  const Ints sizes = {64, 16, 129};
  const std::vector<std::pair<std::string, Attributes>> activations = {{"Selu", {}},
                                                                       {"Selu", {{"alpha", 2.0}, {"gamma", 3.0}}},
                                                                       {"Erf", {}},
                                                                       {"HardSigmoid", {}},
                                                                       {"HardSigmoid", {{"alpha", 0.3}, {"beta", 0.4}}},
                                                                       {"Relu", {}},
                                                                       {"LeakyRelu", {{"alpha", 0.2}}},
                                                                       {"Sigmoid", {}},
                                                                       {"Tanh", {}},
                                                                       {"Gelu", {}},
                                                                       {"Gelu", {{"approximate", std::string("tanh")}}},
                                                                       {"HardSwish", {}},
                                                                       {"Abs", {}},
                                                                       {"Exp", {}},
                                                                       {"Reciprocal", {}}};
  for (const auto& [name, attributes] : activations) {
    SCOPED_TRACE(name);
    Attributes a = attributes;
    a["activation"] = name;
    Case c{.op = "ActivationGrad",
           .opset = 1,
           .attributes = a,
           .inputs = {random_float(sizes), random_float(sizes, -4, 4)},
           .outputs = {{DType::Float32, sizes}},
           .domain = "ai.onnxtrain"};
    const std::vector<Tensor> ours = run(c, "cpu"), fast = run(c, ""), reference = run(c, "reference");
    // The default kernel is oneDNN's own (approximate) eltwise_backward for the others.
    const bool via_onednn = name == "Selu" || name == "Erf" || name == "HardSigmoid";
    for (const Tensor* t : {&ours[0], via_onednn ? &fast[0] : &ours[0]}) {
      const auto* p = reinterpret_cast<const float*>(t->raw());
      const auto* r = reinterpret_cast<const float*>(reference[0].raw());
      int64_t bad = 0;
      for (int64_t i = 0; i < t->numel(); ++i)
        if (!(std::fabs(p[i] - r[i]) <= 1e-6 * std::fabs(r[i]) + 1e-7) && bad++ < 5)
          ADD_FAILURE() << "element " << i << ": " << p[i] << " vs " << r[i];
      EXPECT_EQ(bad, 0);
    }
  }
  const KernelEntry* e =
      KernelRegistry::builtin().find("ai.onnxtrain", "ActivationGrad", DeviceKind::Cpu, DType::Float32, "cpu");
  ASSERT_NE(e, nullptr);
}

// Float64 has no cpu kernel: the registry's default stays the reference kernel.
TEST_P(CpuElementwise, OtherDTypesStayOnReference) {
  const KernelEntry* e = KernelRegistry::builtin().find("", "Add", DeviceKind::Cpu, DType::Float64);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->implementation, "reference");
}

}  // namespace
