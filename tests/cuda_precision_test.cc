// Precision of the cuDNN/cuBLAS kernels on a GPU: the --tf32 switch (kernels/cuda/math_mode.h) governs
// whether cuBLAS may round a float32 product's operands to TF32, and float16/bfloat16 (--precision) Conv,
// ConvGrad, Gemm and MatMul agree with the float32 reference on the same rounded inputs. Without a GPU
// those cases skip, saying so; the prepare-time refusal of a half Gemm's C runs wherever CUDA is compiled.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "graph/error.h"
#include "kernels/cuda/math_mode.h"
#include "kernels/reference/element_convert.h"
#include "tests/cuda_nn_run.h"

using namespace onnxtrain;

namespace {

using namespace cuda_nn_run;

#if ONNXTRAIN_WITH_CUDA

// The largest |cuda - reference| / (sum over k of |a_ik·b_kj|) of a 256x512 by 512x256 MatMul: about
// 2^-24·(a few) for float32 products, about 2^-11 once TF32 rounds the operands.
double matmul_error_bound_ratio(std::mt19937& rng) {
  const Tensor a = random_tensor(rng, {256, 512}), b = random_tensor(rng, {512, 256});
  const KernelCase c{.op = "MatMul", .inputs = {a, b}, .outputs = {f32({256, 256})}};
  const Tensor ours = run_cuda(c)[0], ref = run_reference(c)[0];
  double worst = 0;
  for (int64_t i = 0; i < 256; ++i)
    for (int64_t j = 0; j < 256; ++j) {
      double magnitude = 0;
      for (int64_t k = 0; k < 512; ++k)
        magnitude += std::fabs(double{a.data<float>()[i * 512 + k]} * b.data<float>()[k * 256 + j]);
      const double diff = std::fabs(double{ours.data<float>()[i * 256 + j]} - ref.data<float>()[i * 256 + j]);
      worst = std::max(worst, diff / magnitude);
    }
  return worst;
}

// --tf32 (kernels/cuda/math_mode.h): off, the products are float32; on, cuBLAS may round the operands to
// TF32 (the H100/H200 and every Ampere GPU do), which shows as errors hundreds of times larger.
TEST_F(CudaNnKernels, Tf32SwitchGovernsMatMulPrecision) {
  ASSERT_FALSE(cuda::allow_tf32()) << "TF32 must be off by default";
  const double strict = matmul_error_bound_ratio(rng);
  EXPECT_LT(strict, 1e-6) << "strict float32 products";
  cuda::set_allow_tf32(true);
  const double tf32 = matmul_error_bound_ratio(rng);
  cuda::set_allow_tf32(false);
  EXPECT_GT(tf32, 1e-5) << "TF32 rounding should show (a GPU without TF32 tensor cores fails this: pre-Ampere)";
  EXPECT_LT(tf32, 2e-3) << "TF32 keeps 10 mantissa bits";
}

// --- float16 and bfloat16 (--precision): half operands, float32 accumulation ---

// `t` (float32) rounded to `dtype` (float16 or bfloat16), as half storage.
Tensor to_half(const Tensor& t, DType dtype) {
  Tensor h(dtype, t.sizes());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = t.data<float>()[i];
    h.data<uint16_t>()[i] =
        dtype == DType::Float16 ? reference::double_to_half_bits(v) : reference::float_to_bfloat16_bits(v);
  }
  return h;
}

Tensor to_float(const Tensor& h) {
  Tensor t(DType::Float32, h.sizes());
  for (int64_t i = 0; i < h.numel(); ++i) {
    const uint16_t bits = h.data<uint16_t>()[i];
    t.data<float>()[i] =
        h.dtype() == DType::Float16 ? reference::half_bits_to_float(bits) : reference::bfloat16_bits_to_float(bits);
  }
  return t;
}

// The CUDA kernel of the float32 case `c` run in `dtype` against the float32 reference on the same
// (rounded) inputs: they differ by the output's rounding and the accumulation order, so within a few
// units of the half type's precision of each output's scale.
void expect_half_agrees(const KernelCase& c, DType dtype, const std::string& label) {
  SCOPED_TRACE(c.op + " " + label + " " + std::string(dtype_name(dtype)));
  KernelCase half = c, rounded = c;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.inputs[i].empty()) continue;
    half.inputs[i] = to_half(c.inputs[i], dtype);
    rounded.inputs[i] = to_float(half.inputs[i]);
  }
  for (TensorDesc& d : half.outputs)
    if (d.present()) d.dtype = dtype;
  const std::vector<Tensor> ours = run_cuda(half), ref = run_reference(rounded);
  const double unit = dtype == DType::Float16 ? 0x1p-10 : 0x1p-7;  // the type's relative precision
  for (size_t o = 0; o < ours.size(); ++o) {
    if (!c.outputs[o].present()) continue;
    const Tensor got = to_float(ours[o]);
    double scale = 0;
    for (float v : ref[o].data<float>()) scale = std::max(scale, double{std::fabs(v)});
    int failures = 0;
    for (int64_t i = 0; i < got.numel() && failures < 5; ++i) {
      const double a = got.data<float>()[i], b = ref[o].data<float>()[i];
      if (!(std::fabs(a - b) <= 4 * unit * (std::fabs(b) + 0.05 * scale))) {
        ADD_FAILURE() << "output " << o << " element " << i << ": cuda " << a << ", reference " << b;
        ++failures;
      }
    }
  }
}

TEST_F(CudaNnKernels, HalfPrecisionConvolutionsAndProducts) {
  const Tensor x = r({2, 4, 7, 7}), w = r({6, 2, 3, 3}), b = r({6}), dy = r({2, 6, 4, 4});
  const Attributes a{{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}, {"group", int64_t{2}}};
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
#if ONNXTRAIN_HAVE_CUDNN
    expect_half_agrees({.op = "Conv", .attributes = a, .inputs = {x, w}, .outputs = {f32({2, 6, 4, 4})}}, dtype,
                       "Conv");
    expect_half_agrees({.op = "Conv", .attributes = a, .inputs = {x, w, b}, .outputs = {f32({2, 6, 4, 4})}}, dtype,
                       "Conv with bias");
    expect_half_agrees({.op = "ConvGrad",
                        .attributes = a,
                        .inputs = {dy, x, w},
                        .outputs = {f32({2, 4, 7, 7}), f32({6, 2, 3, 3}), f32({6})},
                        .domain = "ai.onnxtrain"},
                       dtype, "ConvGrad");
#endif
    for (int64_t tb : {0, 1}) {
      const Attributes g{{"transB", tb}, {"alpha", 0.5}};
      expect_half_agrees({.op = "Gemm",
                          .attributes = g,
                          .inputs = {r({8, 16}), r(tb ? Ints{5, 16} : Ints{16, 5})},
                          .outputs = {f32({8, 5})}},
                         dtype, "Gemm");
    }
    expect_half_agrees({.op = "MatMul", .inputs = {r({3, 8, 16}), r({3, 16, 4})}, .outputs = {f32({3, 8, 4})}}, dtype,
                       "batched MatMul");
    expect_half_agrees({.op = "MatMul", .inputs = {r({2, 1, 8, 16}), r({3, 16, 4})}, .outputs = {f32({2, 3, 8, 4})}},
                       dtype, "broadcast MatMul");
  }
}

// A half Gemm takes no C (the autocast pass adds the bias in float32): refused at prepare, naming it.
TEST(CudaNnHalf, GemmWithAHalfCIsRefused) {
  const TensorDesc a{DType::BFloat16, {2, 3}}, b{DType::BFloat16, {3, 4}}, c{DType::BFloat16, {4}};
  const KernelSpec spec{
      .op_type = "Gemm", .opset = 13, .inputs = {a, b, c}, .outputs = {{DType::BFloat16, {2, 4}}}, .node_name = "fc"};
  const KernelEntry* entry = KernelRegistry::builtin().find("", "Gemm", DeviceKind::Cuda, DType::BFloat16);
  ASSERT_NE(entry, nullptr) << "the CUDA Gemm registers bfloat16";
  try {
    entry->prepare(spec);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("C in bfloat16 is not supported"), std::string::npos) << e.what();
  }
}

#endif  // ONNXTRAIN_WITH_CUDA

}  // namespace
