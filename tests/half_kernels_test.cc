// The float16 and bfloat16 reference kernels of Conv, ConvGrad, Gemm and MatMul (what mixed-precision
// training runs in half): they read the half inputs exactly, accumulate as the float64 kernel does and
// round once to nearest even, so their output is bit for bit the float64 kernel's result on the same
// (half-representable) inputs rounded to the half type; and the rounding itself is IEEE's.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/reference/half_float.h"
#include "tests/reference_kernel_call.h"

namespace onnxtrain {
namespace {

using namespace testing_support;
using reference::BFloat16;
using reference::Float16;

// A random tensor of `dtype` whose values are exactly representable in it, and the same values as float64.
std::pair<Tensor, Tensor> random_pair(std::mt19937& rng, DType dtype, const std::vector<int64_t>& sizes) {
  std::uniform_real_distribution<double> real(-2, 2);
  Tensor half(dtype, sizes), wide(DType::Float64, sizes);
  auto* bits = reinterpret_cast<uint16_t*>(half.raw());
  for (int64_t i = 0; i < half.numel(); ++i) {
    const double v = real(rng);
    if (dtype == DType::Float16) {
      const Float16 h(v);
      bits[i] = h.bits;
      wide.data<double>()[i] = static_cast<double>(h);
    } else {
      const BFloat16 h(v);
      bits[i] = h.bits;
      wide.data<double>()[i] = static_cast<double>(h);
    }
  }
  return {half, wide};
}

// Element i of a half tensor as double.
double at(const Tensor& t, int64_t i) {
  const uint16_t b = reinterpret_cast<const uint16_t*>(t.raw())[i];
  return t.dtype() == DType::Float16 ? reference::half_bits_to_float(b) : reference::bfloat16_bits_to_float(b);
}

// `wide` (float64) rounded to `dtype` to nearest even, as double.
double rounded(double wide, DType dtype) {
  return dtype == DType::Float16 ? static_cast<double>(Float16(wide)) : static_cast<double>(BFloat16(wide));
}

struct OpCase {
  std::string op, domain;
  Attributes attributes;
  std::vector<std::vector<int64_t>> inputs;   // sizes
  std::vector<std::vector<int64_t>> outputs;  // sizes
};

// Runs the case in `dtype` and in float64 on the same values; every half output element must equal the
// float64 result rounded once. Returns the largest relative difference to float64 seen (for the caller's
// sanity bound).
double expect_rounded_float64(const OpCase& c, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  KernelCase half_case{.op = c.op, .attributes = c.attributes, .domain = c.domain};
  KernelCase wide_case = half_case;
  for (const auto& sizes : c.inputs) {
    auto [h, w] = random_pair(rng, dtype, sizes);
    half_case.inputs.push_back(h);
    wide_case.inputs.push_back(w);
  }
  for (const auto& sizes : c.outputs) {
    half_case.outputs.push_back({dtype, sizes});
    wide_case.outputs.push_back({DType::Float64, sizes});
  }
  auto run_case = [](const KernelCase& k) {
    const KernelSpec spec = spec_of(k);
    const KernelEntry* entry =
        KernelRegistry::builtin().find(k.domain, k.op, DeviceKind::Cpu, k.inputs[0].dtype(), "reference");
    if (!entry) throw Error("no reference kernel for " + k.op + " " + std::string(dtype_name(k.inputs[0].dtype())));
    return run_prepared(*entry->prepare(spec), k.inputs, spec.outputs);
  };
  const std::vector<Tensor> got = run_case(half_case), want = run_case(wide_case);
  double worst = 0;
  for (size_t o = 0; o < got.size(); ++o) {
    for (int64_t i = 0; i < got[o].numel(); ++i) {
      const double w = want[o].data<double>()[i];
      if (at(got[o], i) != rounded(w, dtype)) {
        ADD_FAILURE() << c.op << " output " << o << " element " << i << ": " << at(got[o], i) << ", float64 " << w;
        return INFINITY;
      }
      if (std::abs(w) > 1e-3) worst = std::max(worst, std::abs(at(got[o], i) - w) / std::abs(w));
    }
  }
  return worst;
}

const std::vector<OpCase>& cases() {
  static const std::vector<OpCase> all = {
      {"Conv",
       "",
       {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 1}}},
       {{2, 3, 5, 6}, {4, 3, 3, 3}, {4}},
       {{2, 4, 3, 6}}},
      {"Conv", "", {{"group", int64_t{2}}}, {{1, 4, 4, 4}, {2, 2, 2, 2}}, {{1, 2, 3, 3}}},
      {"ConvGrad",
       "ai.onnxtrain",
       {{"pads", std::vector<int64_t>{1, 1, 1, 1}}},
       {{2, 4, 5, 5}, {2, 3, 5, 5}, {4, 3, 3, 3}},
       {{2, 3, 5, 5}, {4, 3, 3, 3}, {4}}},
      {"Gemm", "", {{"transB", int64_t{1}}, {"alpha", 0.5}, {"beta", 2.0}}, {{5, 7}, {3, 7}, {3}}, {{5, 3}}},
      {"Gemm", "", {{"transA", int64_t{1}}}, {{7, 5}, {7, 3}}, {{5, 3}}},
      {"MatMul", "", {}, {{2, 4, 9}, {2, 9, 3}}, {{2, 4, 3}}},
      {"MatMul", "", {}, {{4, 9}, {3, 9, 5}}, {{3, 4, 5}}},
  };
  return all;
}

TEST(HalfKernels, Float16IsTheFloat64ResultRoundedOnce) {
  uint32_t seed = 1;
  for (const OpCase& c : cases()) {
    // 11 significant bits: half an ulp is 2^-11 of the value.
    EXPECT_LE(expect_rounded_float64(c, DType::Float16, seed++), std::ldexp(1.0, -11)) << c.op;
  }
}

TEST(HalfKernels, BFloat16IsTheFloat64ResultRoundedOnce) {
  uint32_t seed = 100;
  for (const OpCase& c : cases()) {
    EXPECT_LE(expect_rounded_float64(c, DType::BFloat16, seed++), std::ldexp(1.0, -8)) << c.op;
  }
}

TEST(HalfKernels, RoundingIsToNearestEven) {
  // bfloat16 keeps 8 significant bits: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 (even: 1);
  // 1 + 3·2^-8 a tie between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(static_cast<double>(BFloat16(1 + std::ldexp(1.0, -8))), 1.0);
  EXPECT_EQ(static_cast<double>(BFloat16(1 + 3 * std::ldexp(1.0, -8))), 1 + std::ldexp(1.0, -6));
  EXPECT_EQ(static_cast<double>(BFloat16(1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -20))), 1 + std::ldexp(1.0, -7));
  EXPECT_EQ(static_cast<double>(BFloat16(-1.5)), -1.5);
  EXPECT_TRUE(std::isinf(static_cast<double>(BFloat16(1e39))));
  EXPECT_EQ(static_cast<double>(BFloat16(std::ldexp(1.0, -130))), std::ldexp(1.0, -130));  // subnormal
  EXPECT_TRUE(std::isnan(static_cast<double>(BFloat16(NAN))));
  // float16: 11 significant bits, largest finite 65504.
  EXPECT_EQ(static_cast<double>(Float16(1 + std::ldexp(1.0, -11))), 1.0);
  EXPECT_EQ(static_cast<double>(Float16(65504.0)), 65504.0);
  EXPECT_TRUE(std::isinf(static_cast<double>(Float16(65520.0))));  // the tie past 65504 rounds to infinity
}

TEST(HalfKernels, Float16ProductsPastTheRangeAreInfinite) {
  // What fp16 loss scaling watches for: a finite float result beyond 65504 stores as infinity.
  Tensor a(DType::Float16, {1, 2}), b(DType::Float16, {2, 1});
  for (int i = 0; i < 2; ++i) {
    reinterpret_cast<uint16_t*>(a.raw())[i] = Float16(300.0).bits;
    reinterpret_cast<uint16_t*>(b.raw())[i] = Float16(200.0).bits;
  }
  const Tensor y = run1({.op = "MatMul", .inputs = {a, b}, .outputs = {{DType::Float16, {1, 1}}}});
  EXPECT_TRUE(std::isinf(at(y, 0)));
}

TEST(HalfKernels, MixedDtypesAreRefused) {
  Tensor a(DType::BFloat16, {2, 2}), b(DType::Float32, {2, 2});
  EXPECT_NE(error_of({.op = "MatMul", .inputs = {a, b}, .outputs = {{DType::BFloat16, {2, 2}}}}).find("one dtype"),
            std::string::npos);
}

}  // namespace
}  // namespace onnxtrain
