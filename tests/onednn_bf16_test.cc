// The oneDNN bfloat16 Conv, ConvGrad, Gemm and MatMul kernels (what --precision bf16 runs on the CPU)
// against the bfloat16 reference kernels, which half_kernels_test ties to float64 rounded once. Both read
// the same bfloat16 inputs and accumulate in float32 or wider, then round once: they may differ by the
// rounding of a float32 sum taken in another order, so by one bfloat16 step at most.
// On a CPU with native bfloat16 (AVX-512 BF16 or AMX) the kernel must run one of oneDNN's JIT primitives;
// on any other CPU it must be the reference kernel, and these tests check that instead.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "graph/op_schema.h"
#include "kernels/backend_info.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/reference/half_float.h"
#include "tests/graph_builder.h"
#include "tests/reference_kernel_call.h"

namespace onnxtrain {
namespace {

using namespace testing_support;

Tensor random_bf16(std::mt19937& rng, const std::vector<int64_t>& sizes) {
  std::uniform_real_distribution<double> real(-2, 2);
  Tensor t(DType::BFloat16, sizes);
  auto* bits = reinterpret_cast<uint16_t*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) bits[i] = reference::BFloat16(real(rng)).bits;
  return t;
}

double at(const Tensor& t, int64_t i) {
  return reference::bfloat16_bits_to_float(reinterpret_cast<const uint16_t*>(t.raw())[i]);
}

struct BfCase {
  std::string op, domain;
  Attributes attributes;
  std::vector<std::vector<int64_t>> inputs, outputs;  // sizes; an empty output is not wanted
};

// Runs `c` on oneDNN and on the reference kernel, checks the oneDNN primitive ran where the CPU has native
// bfloat16, and that every output element is within one bfloat16 step of the reference's.
void expect_matches_reference(const BfCase& c, uint32_t seed) {
  SCOPED_TRACE(c.op + " case seeded " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::vector<Tensor> inputs;
  for (const auto& sizes : c.inputs) inputs.push_back(random_bf16(rng, sizes));
  KernelSpec spec{.op_type = c.op, .domain = c.domain, .opset = 17, .attributes = c.attributes, .node_name = "t"};
  spec.inputs = input_descs(inputs);
  for (const auto& sizes : c.outputs)
    spec.outputs.push_back(sizes.empty() ? TensorDesc{} : TensorDesc{DType::BFloat16, sizes});
  const auto entry = [&](const char* implementation) {
    const KernelEntry* e =
        KernelRegistry::builtin().find(c.domain, c.op, DeviceKind::Cpu, DType::BFloat16, implementation);
    if (!e) throw Error("no " + std::string(implementation) + " bfloat16 kernel for " + c.op);
    return e;
  };
  const std::unique_ptr<Kernel> onednn = entry("onednn")->prepare(spec);
  const auto* reports = dynamic_cast<const onednn::ReportsImplementation*>(onednn.get());
  const std::string implementation = reports ? reports->library_implementation() : "";
  if (cpu_has_native_bf16()) {
    // One of oneDNN's JIT implementations ("jit_bf16:avx512_core_bf16", "brg:avx512_core_bf16", or
    // "x64:gemm:jit", im2col and its bfloat16 GEMM, for a first layer's weight gradient), not "ref:any".
    EXPECT_FALSE(implementation.empty()) << "the reference kernel ran";
    EXPECT_EQ(implementation.find("ref"), std::string::npos) << "oneDNN ran " << implementation;
  } else {
    EXPECT_EQ(implementation, "") << "without native bfloat16 the reference kernel runs";
  }
  const std::vector<Tensor> got = run_prepared(*onednn, inputs, spec.outputs);
  const std::vector<Tensor> want = run_prepared(*entry("reference")->prepare(spec), inputs, spec.outputs);
  for (size_t o = 0; o < got.size(); ++o) {
    if (!spec.outputs[o].present()) continue;  // an output not asked for
    int failures = 0;
    for (int64_t i = 0; i < got[o].numel() && failures < 5; ++i) {
      const double g = at(got[o], i), w = at(want[o], i);
      // One bfloat16 step (8 significant bits) of the larger, and a float32 sum's order near zero.
      if (std::abs(g - w) > std::ldexp(std::max(std::abs(g), std::abs(w)), -7) + 1e-4) {
        ADD_FAILURE() << "output " << o << " element " << i << ": oneDNN " << g << ", reference " << w;
        ++failures;
      }
    }
  }
}

using Ints = std::vector<int64_t>;

TEST(OnednnBFloat16, RegistryPrefersOnednn) {
  for (const auto& [domain, op] : {std::pair{"", "Conv"}, {"", "Gemm"}, {"", "MatMul"}, {"ai.onnxtrain", "ConvGrad"}}) {
    const KernelEntry* entry = KernelRegistry::builtin().find(domain, op, DeviceKind::Cpu, DType::BFloat16);
    ASSERT_NE(entry, nullptr) << op;
    EXPECT_EQ(entry->implementation, "onednn") << op;
  }
}

TEST(OnednnBFloat16, ConvMatchesReference) {
  const Attributes pad1{{"pads", Ints{1, 1, 1, 1}}};
  uint32_t seed = 1;
  for (const BfCase& c : std::vector<BfCase>{
           {"Conv", "", pad1, {{4, 16, 14, 14}, {32, 16, 3, 3}}, {{4, 32, 14, 14}}},
           {"Conv", "", {{"strides", Ints{2, 2}}}, {{2, 8, 9, 9}, {16, 8, 1, 1}}, {{2, 16, 5, 5}}},
           {"Conv",
            "",
            {{"group", int64_t{4}}, {"pads", Ints{1, 1, 1, 1}}},
            {{2, 16, 7, 7}, {16, 4, 3, 3}},
            {{2, 16, 7, 7}}},
           {"Conv", "", {}, {{3, 1, 28, 28}, {8, 1, 5, 5}}, {{3, 8, 24, 24}}},  // one input channel (first layer)
           {"Conv",  // a single output pixel: a matrix product (single_pixel_conv.h)
            "",
            {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}},
            {{4, 16, 2, 2}, {32, 16, 3, 3}, {32}},
            {{4, 32, 1, 1}}},
       })
    expect_matches_reference(c, seed++);
}

TEST(OnednnBFloat16, ConvGradMatchesReference) {
  const Attributes pad1{{"pads", Ints{1, 1, 1, 1}}};
  uint32_t seed = 10;
  for (const BfCase& c : std::vector<BfCase>{
           {"ConvGrad",
            "ai.onnxtrain",
            pad1,
            {{4, 32, 14, 14}, {4, 16, 14, 14}, {32, 16, 3, 3}},
            {{4, 16, 14, 14}, {32, 16, 3, 3}}},
           {"ConvGrad",
            "ai.onnxtrain",
            {{"strides", Ints{2, 2}}},
            {{2, 16, 5, 5}, {2, 8, 9, 9}, {16, 8, 1, 1}},
            {{2, 8, 9, 9}, {16, 8, 1, 1}}},
           {"ConvGrad", "ai.onnxtrain", {}, {{3, 8, 24, 24}, {3, 1, 28, 28}, {8, 1, 5, 5}}, {{}, {8, 1, 5, 5}}},
           // A single output pixel: matrix products (single_pixel_conv.h), the bias gradient included.
           {"ConvGrad",
            "ai.onnxtrain",
            pad1,
            {{4, 32, 1, 1}, {4, 16, 1, 1}, {32, 16, 3, 3}},
            {{4, 16, 1, 1}, {32, 16, 3, 3}, {32}}},
       })
    expect_matches_reference(c, seed++);
}

TEST(OnednnBFloat16, GemmAndMatMulMatchReference) {
  uint32_t seed = 20;
  for (const BfCase& c : std::vector<BfCase>{
           {"Gemm", "", {{"transB", int64_t{1}}}, {{64, 784}, {128, 784}}, {{64, 128}}},  // a linear layer
           {"Gemm", "", {{"transA", int64_t{1}}}, {{64, 10}, {64, 128}}, {{10, 128}}},    // its weight gradient
           {"Gemm", "", {}, {{64, 10}, {10, 128}}, {{64, 128}}},                          // its input gradient
           {"MatMul", "", {}, {{2, 16, 48}, {2, 48, 24}}, {{2, 16, 24}}},
       })
    expect_matches_reference(c, seed++);
}

// FusedMatMul with float32_output (autocast's product on the CPU): bfloat16 A (transposed) and B, float32 C
// and Y, alpha. The reference kernel against the formula over the operands' values, oneDNN's against it.
TEST(OnednnBFloat16, FusedMatMulWithFloat32OutputMatchesReference) {
  std::mt19937 rng(31);
  const std::vector<Tensor> inputs = {random_bf16(rng, {2, 16, 5}), random_bf16(rng, {16, 7}), uniform_tensor({7}, 13)};
  KernelSpec spec{.op_type = "FusedMatMul",
                  .domain = kTrainingDomain,
                  .opset = 1,
                  .attributes = {{"transA", int64_t{1}}, {"alpha", 0.5}, {"float32_output", int64_t{1}}},
                  .node_name = "t"};
  spec.inputs = input_descs(inputs);
  spec.outputs = {{DType::Float32, {2, 5, 7}}};
  const auto run = [&](const char* implementation) {
    const KernelEntry* e = KernelRegistry::builtin().find(kTrainingDomain, "FusedMatMul", DeviceKind::Cpu,
                                                          DType::BFloat16, implementation);
    return run_prepared(*e->prepare(spec), inputs, spec.outputs)[0];
  };
  const Tensor want = run("reference");
  ASSERT_EQ(want.dtype(), DType::Float32);
  const std::span<const float> w = want.data<float>(), c = inputs[2].data<float>();
  for (int64_t batch = 0; batch < 2; ++batch) {
    for (int64_t i = 0; i < 5; ++i) {
      for (int64_t j = 0; j < 7; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < 16; ++k) sum += at(inputs[0], (batch * 16 + k) * 5 + i) * at(inputs[1], k * 7 + j);
        EXPECT_NEAR(w[(batch * 5 + i) * 7 + j], 0.5 * sum + c[j], 1e-5);
      }
    }
  }
  const Tensor got = run("onednn");
  for (int64_t i = 0; i < want.numel(); ++i) EXPECT_NEAR(got.data<float>()[i], w[i], 1e-4) << i;
}

}  // namespace
}  // namespace onnxtrain
