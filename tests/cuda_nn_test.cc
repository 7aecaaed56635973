// The cuDNN/cuBLAS kernels (kernels/cuda/conv*, pooling, batch_norm*, lrn, gemm*).
// On the CPU, everywhere: their host-side parameter mapping (kernels/cuda/cudnn_params.h) - window
// mapping onto cuDNN's symmetric pads and the cases it refuses, the cuBLAS call of a row-major Gemm, the
// strided-batched plan of a broadcasting MatMul (executed on the CPU with cuBLAS's column-major rules and
// compared with the reference MatMul), BatchNormalization's running statistics from an unbiased
// variance (compared with the reference BatchNormalization), and the direct pooling functions that run
// what cuDNN cannot pool (compared with the reference pooling kernels and their grads). With CUDA compiled in, the
// registry must hold the kernels and prepare-time refusals must name the attribute. On a GPU, every kernel runs against
// the reference kernel (|cuda - reference| <= 1e-5 + 1e-4·|ref|); without one those cases skip, saying so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "graph/error.h"
#include "kernels/cuda/conv_algorithms.h"
#include "kernels/cuda/cuda_runtime.h"
#include "kernels/cuda/cudnn_direct_pooling.h"
#include "kernels/cuda/cudnn_params.h"
#include "kernels/kernel.h"
#include "kernels/reference/kernel_plumbing.h"
#include "kernels/reference/pool_window.h"
#include "tests/cuda_nn_run.h"
#include "tests/reference_kernel_call.h"

using namespace onnxtrain;

namespace {

using testing_support::KernelCase;
using namespace cuda_nn_run;

reference::WindowGeometry window(Ints input, Ints output, Ints kernel, Ints strides, Ints pad_begin, Ints pad_end,
                                 Ints dilations = {}) {
  reference::WindowGeometry w;
  w.input = input;
  w.output = output;
  w.kernel = kernel;
  w.strides = strides;
  w.pad_begin = pad_begin;
  w.pad_end = pad_end;
  w.dilations = dilations.empty() ? Ints(input.size(), 1) : dilations;
  return w;
}

// --- cuDNN windows ---

TEST(CudnnWindow, SymmetricPadsMapOneToOne) {
  const auto w = window({8, 9}, {4, 5}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1});
  const cuda::CudnnWindow cw = cuda::cudnn_window(w, cuda::WindowUse::Conv);
  ASSERT_TRUE(cw.problem.empty()) << cw.problem;
  EXPECT_EQ(cw.kernel, (std::vector<int>{3, 3}));
  EXPECT_EQ(cw.pads, (std::vector<int>{1, 1}));
  EXPECT_EQ(cw.strides, (std::vector<int>{2, 2}));
  EXPECT_EQ(cw.dilations, (std::vector<int>{1, 1}));
}

TEST(CudnnWindow, OneSpatialDimGetsAUnitAxis) {
  const auto w = window({10}, {6}, {3}, {1}, {0}, {0}, {2});
  const cuda::CudnnWindow cw = cuda::cudnn_window(w, cuda::WindowUse::Conv);
  ASSERT_TRUE(cw.problem.empty()) << cw.problem;
  EXPECT_EQ(cw.kernel, (std::vector<int>{3, 1}));
  EXPECT_EQ(cw.pads, (std::vector<int>{0, 0}));
  EXPECT_EQ(cw.dilations, (std::vector<int>{2, 1}));
}

TEST(CudnnWindow, SmallerEndPadThatKeepsTheOutputSizeIsAccepted) {
  // in 5, k 2, s 2, pads (1, 0): 3 windows either way, all starting at o·2 - 1.
  const cuda::CudnnWindow cw = cuda::cudnn_window(window({5}, {3}, {2}, {2}, {1}, {0}), cuda::WindowUse::MaxPool);
  EXPECT_TRUE(cw.problem.empty()) << cw.problem;
}

TEST(CudnnWindow, RefusesWhatCudnnCannotPad) {
  // SAME_UPPER with an odd total pad at stride 1: pads (0, 1) give 4 outputs, symmetric 0 gives 3.
  auto same = window({4}, {4}, {2}, {1}, {0}, {1});
  same.auto_pad = "SAME_UPPER";
  const cuda::CudnnWindow a = cuda::cudnn_window(same, cuda::WindowUse::Conv);
  EXPECT_NE(a.problem.find("pads on spatial axis 0"), std::string::npos) << a.problem;
  EXPECT_NE(a.problem.find("SAME_UPPER"), std::string::npos) << a.problem;
  // ceil_mode: in 6, k 3, s 2 gives 3 windows with ceil, 2 with floor.
  EXPECT_FALSE(cuda::cudnn_window(window({6}, {3}, {3}, {2}, {0}, {0}), cuda::WindowUse::MaxPool).problem.empty());
  // Pools have no dilation in cuDNN.
  const cuda::CudnnWindow d = cuda::cudnn_window(window({9}, {5}, {3}, {1}, {0}, {0}, {2}), cuda::WindowUse::MaxPool);
  EXPECT_NE(d.problem.find("dilations"), std::string::npos) << d.problem;
  // Four spatial dims.
  EXPECT_FALSE(
      cuda::cudnn_window(window({3, 3, 3, 3}, {1, 1, 1, 1}, {3, 3, 3, 3}, {1, 1, 1, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}),
                         cuda::WindowUse::Conv)
          .problem.empty());
}

TEST(CudnnConvWindow, PadsExplicitlyWhatCudnnCannotPad) {
  // SAME_UPPER at stride 1 with an odd total: pads (0, 1) on the first axis; the second is symmetric.
  auto same = window({4, 5}, {4, 5}, {2, 3}, {1, 1}, {0, 1}, {1, 1});
  same.auto_pad = "SAME_UPPER";
  const cuda::CudnnConvWindow a = cuda::cudnn_conv_window(same);
  ASSERT_TRUE(a.window.problem.empty()) << a.window.problem;
  ASSERT_TRUE(a.padded());
  EXPECT_EQ(a.extra_begin, (Ints{0, 0}));
  EXPECT_EQ(a.extra_end, (Ints{1, 0}));
  EXPECT_EQ(a.window.pads, (std::vector<int>{0, 1}));
  EXPECT_EQ(cuda::padded_operand_dims({2, 3, 4, 5}, a), (std::vector<int>{2, 3, 5, 5}));
  // cuDNN's symmetric pads over the padded input give the node's output count on every axis.
  for (size_t d = 0; d < 2; ++d) {
    EXPECT_EQ(cuda::cudnn_output_size(same.input[d] + a.extra_begin[d] + a.extra_end[d], a.window.pads[d],
                                      same.kernel[d], same.strides[d], same.dilations[d]),
              same.output[d])
        << "axis " << d;
  }
  // A larger begin pad (1-D, stride 2): the extra goes before; the unit axis cuDNN needs is not padded.
  const cuda::CudnnConvWindow b = cuda::cudnn_conv_window(window({5}, {3}, {3}, {2}, {2}, {1}));
  ASSERT_TRUE(b.window.problem.empty()) << b.window.problem;
  EXPECT_EQ(b.extra_begin, (Ints{1}));
  EXPECT_EQ(b.extra_end, (Ints{0}));
  EXPECT_EQ(cuda::padded_operand_dims({1, 1, 5, 1}, b), (std::vector<int>{1, 1, 6, 1}));
  // What cuDNN takes as it is is not padded; a negative pad (a crop) stays refused.
  EXPECT_FALSE(cuda::cudnn_conv_window(window({8}, {4}, {3}, {2}, {1}, {1})).padded());
  EXPECT_FALSE(cuda::cudnn_conv_window(window({5}, {4}, {2}, {1}, {1}, {-1})).window.problem.empty());
}

TEST(CudnnWindow, IncludePadWindowsNeverReachPastTheNodesPadding) {
  // pads (1, 0), in 5, k 3, s 2: cuDNN (pad 1 both ends) gives floor((5+2-3)/2)+1 = 3 windows, as the node's
  // ceil_mode does, but the last covers [3, 6), one past the end pad: cuDNN would count it.
  const auto w = window({5}, {3}, {3}, {2}, {1}, {0});
  EXPECT_TRUE(cuda::cudnn_window(w, cuda::WindowUse::AveragePoolExcludePad).problem.empty());
  const cuda::CudnnWindow cw = cuda::cudnn_window(w, cuda::WindowUse::AveragePoolIncludePad);
  EXPECT_NE(cw.problem.find("count_include_pad"), std::string::npos) << cw.problem;
}

// Over a sweep of 1-D geometries: an accepted window yields the node's output count with cuDNN's
// formula, and for count_include_pad every window lies inside the node's padded input, so the reference's
// count (window elements inside [-pad_begin, in + pad_end)) is the whole window, as cuDNN divides.
TEST(CudnnWindow, AcceptedGeometriesAgreeWithTheReference) {
  int accepted = 0, refused = 0;
  for (int64_t in = 1; in <= 9; ++in)
    for (int64_t k = 1; k <= 4; ++k)
      for (int64_t s = 1; s <= 3; ++s)
        for (int64_t pb = 0; pb < k; ++pb)
          for (int64_t pe = 0; pe < k; ++pe)
            for (int ceil = 0; ceil <= 1; ++ceil) {
              const int64_t span = in + pb + pe - k;
              if (span < 0) continue;
              const int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
              const auto w = window({in}, {out}, {k}, {s}, {pb}, {pe});
              const cuda::CudnnWindow cw = cuda::cudnn_window(w, cuda::WindowUse::AveragePoolIncludePad);
              if (!cw.problem.empty()) {
                ++refused;
                continue;
              }
              ++accepted;
              EXPECT_EQ(cuda::cudnn_output_size(in, pb, k, s, 1), out);
              for (int64_t o = 0; o < out; ++o) {
                const int64_t start = o * s - pb;
                EXPECT_GE(start, -pb);
                EXPECT_LE(start + k, in + pe) << "in " << in << " k " << k << " s " << s << " pads " << pb << "," << pe;
                EXPECT_LT(start, in);  // never wholly in the padding
              }
            }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(refused, 10);
}

TEST(CudnnDims, PadsToRankFourAndRefusesIntOverflow) {
  EXPECT_EQ(*cuda::cudnn_dims({2, 3, 7}), (std::vector<int>{2, 3, 7, 1}));
  EXPECT_EQ(*cuda::cudnn_dims({2, 3, 4, 5, 6}), (std::vector<int>{2, 3, 4, 5, 6}));
  EXPECT_FALSE(cuda::cudnn_dims({2, int64_t{1} << 33, 1, 1}).has_value());
  // Each dim fits an int but the element count does not: the packed strides would overflow.
  EXPECT_FALSE(cuda::cudnn_dims({1 << 16, 1 << 16, 1, 1}).has_value());
  EXPECT_FALSE(cuda::cudnn_dims({0, 1 << 20, 1 << 12, 1}).has_value()) << "a zero size counts as 1, as cuDNN sees it";
  EXPECT_TRUE(cuda::cudnn_dims({1 << 15, 1 << 15, 1, 1}).has_value());
  EXPECT_EQ(cuda::packed_strides({2, 3, 4, 5}), (std::vector<int>{60, 20, 5, 1}));
}

// --- cuBLAS calls, executed on the CPU with cuBLAS's column-major semantics ---

// C (column major, ldc) = op(A)·op(B) for column-major A (lda), B (ldb), as cublasSgemm with beta 0.
void column_major_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                       int64_t ldb, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = ta ? a[p + i * lda] : a[i + p * lda];
        const double bv = tb ? b[j + p * ldb] : b[p + j * ldb];
        sum += av * bv;
      }
      c[i + j * ldc] = static_cast<float>(sum);
    }
}

TEST(CublasGemmCall, RowMajorOperandsWithEveryTransposeFlag) {
  std::mt19937 rng(7);
  const int64_t m = 3, n = 5, k = 4;
  for (int ta = 0; ta <= 1; ++ta)
    for (int tb = 0; tb <= 1; ++tb) {
      const Tensor a = random_tensor(rng, ta ? Ints{k, m} : Ints{m, k});
      const Tensor b = random_tensor(rng, tb ? Ints{n, k} : Ints{k, n});
      const cuda::GemmCall call = cuda::gemm_call(m, n, k, ta, tb);
      std::vector<float> y(m * n);
      column_major_gemm(call.trans_first, call.trans_second, call.rows, call.cols, call.inner, b.data<float>().data(),
                        call.ld_first, a.data<float>().data(), call.ld_second, y.data(), call.ld_out);
      const Tensor expected = testing_support::run1({.op = "Gemm",
                                                     .attributes = {{"transA", int64_t{ta}}, {"transB", int64_t{tb}}},
                                                     .inputs = {a, b},
                                                     .outputs = {f32({m, n})}});
      for (int64_t i = 0; i < m * n; ++i) EXPECT_NEAR(y[i], expected.data<float>()[i], 1e-5) << ta << tb << i;
    }
}

// Runs a MatMul plan as cuBLAS would (row-major operands, B first) and returns Y.
std::vector<float> run_plan(const cuda::MatMulPlan& plan, const Tensor& a, const Tensor& b) {
  int64_t numel = 1;
  for (int64_t s : plan.y_sizes) numel *= s;
  std::vector<float> y(numel, -1.0f);
  for (const cuda::StridedBatch& c : plan.calls) {
    for (int64_t i = 0; i < c.count; ++i) {
      column_major_gemm(false, false, plan.n, plan.m, plan.k, b.data<float>().data() + c.b_offset + i * c.b_stride,
                        plan.n, a.data<float>().data() + c.a_offset + i * c.a_stride, plan.k,
                        y.data() + c.y_offset + i * c.y_stride, plan.n);
    }
  }
  return y;
}

TEST(MatMulPlan, BroadcastsLikeTheReference) {
  std::mt19937 rng(11);
  struct Shapes {
    Ints a, b;
    size_t calls;
    bool fold;
  };
  const std::vector<Shapes> cases = {
      {{3, 4}, {4, 5}, 1, false},              // plain
      {{4}, {4, 5}, 1, false},                 // 1-D A: a row
      {{3, 4}, {4}, 1, false},                 // 1-D B: a column
      {{4}, {4}, 1, false},                    // dot product
      {{2, 3, 4}, {4, 5}, 1, true},            // B shared: rows folded
      {{2, 3, 3, 4}, {2, 3, 4, 5}, 1, false},  // equal batches merge into one strided run
      {{3, 4}, {6, 4, 5}, 1, false},           // A broadcast: stride 0
      {{2, 1, 3, 4}, {5, 4, 2}, 2, false},     // both broadcast: one run per outer index
      {{2, 1, 3, 4}, {1, 5, 4, 2}, 2, false},
      {{5, 1, 3, 4}, {5, 4, 4, 2}, 5, false},
      {{1, 1, 3, 4}, {4, 2}, 1, false},           // unit batch dims vanish
      {{2, 3, 1, 3, 4}, {3, 5, 4, 2}, 6, false},  // nothing merges: one run of 5 per (2, 3) index
  };
  for (const Shapes& s : cases) {
    SCOPED_TRACE(reference::sizes_to_string(s.a) + " x " + reference::sizes_to_string(s.b));
    const cuda::MatMulPlan plan = cuda::plan_matmul(s.a, s.b);
    ASSERT_TRUE(plan.problem.empty()) << plan.problem;
    EXPECT_EQ(plan.calls.size(), s.calls);
    EXPECT_EQ(plan.fold_rows, s.fold);
    const Tensor a = random_tensor(rng, s.a), b = random_tensor(rng, s.b);
    const Tensor expected = testing_support::run1({.op = "MatMul", .inputs = {a, b}, .outputs = {f32(plan.y_sizes)}});
    const std::vector<float> y = run_plan(plan, a, b);
    ASSERT_EQ(static_cast<int64_t>(y.size()), expected.numel());
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected.data<float>()[i], 1e-5) << i;
  }
  EXPECT_FALSE(cuda::plan_matmul({3, 4}, {5, 6}).problem.empty());
  EXPECT_FALSE(cuda::plan_matmul({2, 3, 4}, {3, 4, 5}).problem.empty());
  EXPECT_TRUE(cuda::plan_matmul({0, 3, 4}, {4, 5}).calls.empty());  // empty Y: nothing to run
}

// --- BatchNormalization's running statistics ---

TEST(BatchNormStatistics, UnbiasedVarianceBecomesTheReferencesRunningVariance) {
  std::mt19937 rng(3);
  const Ints x_sizes{4, 3, 5};
  const int64_t count = 4 * 5;
  const Tensor x = random_tensor(rng, x_sizes);
  const Tensor scale = random_tensor(rng, {3}), bias = random_tensor(rng, {3});
  const Tensor mean = random_tensor(rng, {3}), var = random_tensor(rng, {3}, 0.5, 2);
  const double momentum = 0.7;
  const std::vector<Tensor> ref =
      testing_support::run({.op = "BatchNormalization",
                            .opset = 15,
                            .attributes = {{"training_mode", int64_t{1}}, {"momentum", momentum}},
                            .inputs = {x, scale, bias, mean, var},
                            .outputs = {f32(x_sizes), f32({3}), f32({3})}});
  for (int64_t c = 0; c < 3; ++c) {
    // What cuDNN's running buffers hold with exponentialAverageFactor 1: batch mean, unbiased variance.
    double sum = 0, squares = 0;
    for (int64_t n = 0; n < 4; ++n)
      for (int64_t i = 0; i < 5; ++i) sum += x.data<float>()[(n * 3 + c) * 5 + i];
    const double batch_mean = sum / count;
    for (int64_t n = 0; n < 4; ++n)
      for (int64_t i = 0; i < 5; ++i) squares += std::pow(x.data<float>()[(n * 3 + c) * 5 + i] - batch_mean, 2);
    const double unbiased = squares / (count - 1);
    EXPECT_NEAR(cuda::running_statistic(mean.data<float>()[c], batch_mean, momentum), ref[1].data<float>()[c], 1e-6);
    EXPECT_NEAR(cuda::running_statistic(var.data<float>()[c], cuda::population_variance(unbiased, count), momentum),
                ref[2].data<float>()[c], 1e-6);
  }
  EXPECT_EQ(cuda::population_variance(12.0, 4), 9.0);
  EXPECT_EQ(cuda::population_variance(std::nan(""), 1), 0.0);  // one value: cuDNN's unbiased one is undefined
}

// --- direct pooling (what cuDNN cannot pool), run on the CPU against the reference kernels ---

struct PoolCase {
  Ints x, kernel, strides, pads, dilations;
  int64_t ceil = 0, include_pad = 0, storage_order = 0;
};

TEST(DirectPooling, MatchesTheReferenceForwardAndBackward) {
  std::mt19937 rng(17);
  const std::vector<PoolCase> cases = {
      {{2, 3, 7, 6}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, 0, 0},  // ceil_mode overhang
      {{1, 2, 6, 7}, {2, 3}, {2, 1}, {0, 1, 1, 0}, {1, 1}, 0, 1, 1},  // asymmetric pads, column-major indices
      {{1, 2, 9}, {3}, {1}, {1, 0}, {2}, 0, 0, 0},                    // dilation
      {{1, 1, 5, 5, 4}, {2, 2, 2}, {2, 2, 2}, {1, 0, 1, 0, 1, 1}, {1, 1, 1}, 1, 1, 0},
      {{2, 2, 9, 9}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0, 0, 0},  // ResNet's stem
      {{1, 2, 8, 7}, {2, 2}, {1, 2}, {0, 1, 1, 0}, {2, 1}, 0, 0, 0},  // 2-D dilation, asymmetric pads
  };
  for (const PoolCase& c : cases) {
    SCOPED_TRACE(reference::sizes_to_string(c.x));
    const size_t n = c.kernel.size();
    Ints y_sizes{c.x[0], c.x[1]};
    for (size_t d = 0; d < n; ++d) {
      const int64_t span = c.x[d + 2] + c.pads[d] + c.pads[d + n] - ((c.kernel[d] - 1) * c.dilations[d] + 1);
      y_sizes.push_back((c.ceil ? (span + c.strides[d] - 1) / c.strides[d] : span / c.strides[d]) + 1);
    }
    const Attributes attributes{
        {"kernel_shape", c.kernel},        {"strides", c.strides}, {"pads", c.pads},
        {"dilations", c.dilations},        {"ceil_mode", c.ceil},  {"count_include_pad", c.include_pad},
        {"storage_order", c.storage_order}};
    // Integers, half of them 0 (as after a ReLU): windows with tied maxima, where the first one wins.
    Tensor x = random_tensor(rng, c.x);
    for (float& v : x.data<float>()) v = std::max(0.0f, std::round(2 * v));
    const Tensor dy = random_tensor(rng, y_sizes);
    const KernelSpec spec{"MaxPool", "", 17, attributes, {f32(c.x)}, {f32(y_sizes)}, "n"};
    const reference::PoolGeometry g = reference::read_pool_geometry(spec, spec.inputs[0], "X", spec.outputs[0], "Y");
    const int64_t in_plane = reference::product_of(c.x, 2), out_plane = reference::product_of(y_sizes, 2);
    for (bool max : {true, false}) {
      const cuda::DirectPool p = cuda::direct_pool(g.window, g.planes, max, c.include_pad == 1, c.storage_order == 1);
      Attributes a = attributes;
      if (max) a.erase("count_include_pad");
      std::vector<Tensor> ref =
          testing_support::run({.op = max ? "MaxPool" : "AveragePool",
                                .opset = 17,
                                .attributes = a,
                                .inputs = {x},
                                .outputs = max ? std::vector<TensorDesc>{f32(y_sizes), {DType::Int64, y_sizes}}
                                               : std::vector<TensorDesc>{f32(y_sizes)}});
      for (int64_t plane = 0; plane < g.planes; ++plane) {
        for (int64_t o = 0; o < out_plane; ++o) {
          long long winner = -1;
          const float y = cuda::direct_pool_output(p, x.data<float>().data() + plane * in_plane, o, &winner);
          EXPECT_NEAR(y, ref[0].data<float>()[plane * out_plane + o], 1e-6) << max << " output " << o;
          if (max) {
            EXPECT_EQ(cuda::direct_pool_index(p, plane, winner), ref[1].data<int64_t>()[plane * out_plane + o]);
          }
        }
      }
      const KernelSpec grad_spec{
          max ? "MaxPoolGrad" : "AveragePoolGrad",
          "ai.onnxtrain",
          17,
          a,
          {f32(y_sizes), max ? f32(c.x) : TensorDesc{DType::Int64, {static_cast<int64_t>(c.x.size())}}},
          {f32(c.x)},
          "n"};
      const Tensor shape = Tensor::vector_int64(c.x);
      const std::vector<Tensor> grad_inputs{dy, max ? x : shape};
      const KernelEntry* entry = KernelRegistry::builtin().find("ai.onnxtrain", grad_spec.op_type, DeviceKind::Cpu,
                                                                DType::Float32, "reference");
      const Tensor dx = testing_support::run_prepared(*entry->prepare(grad_spec), grad_inputs, grad_spec.outputs)[0];
      for (int64_t plane = 0; plane < g.planes; ++plane) {
        for (int64_t i = 0; i < in_plane; ++i) {
          const float got = cuda::direct_pool_grad(p, x.data<float>().data() + plane * in_plane,
                                                   dy.data<float>().data() + plane * out_plane, i);
          EXPECT_NEAR(got, dx.data<float>()[plane * in_plane + i], 1e-5) << max << " dx " << i;
        }
      }
      if (!cuda::max_pool2d_in_two_passes(p)) continue;
      // The two-pass backward of 2 spatial dims gives the same dX, bit for bit.
      for (int64_t plane = 0; plane < g.planes; ++plane) {
        std::vector<int> winners(static_cast<size_t>(out_plane));
        for (int64_t o = 0; o < out_plane; ++o) {
          winners[o] = cuda::max_pool2d_winner(p, x.data<float>().data() + plane * in_plane, static_cast<int>(o));
        }
        for (int64_t i = 0; i < in_plane; ++i) {
          const float got = cuda::max_pool2d_grad(p, winners.data(), dy.data<float>().data() + plane * out_plane,
                                                  static_cast<int>(i));
          EXPECT_EQ(got, dx.data<float>()[plane * in_plane + i]) << "two passes, dx " << i;
        }
      }
    }
  }
}

// --- registry and prepare (CUDA builds) ---

#if ONNXTRAIN_WITH_CUDA

struct OpName {
  const char* domain;
  const char* op;
  bool cudnn;
};
const OpName kOps[] = {{"", "Conv", true},
                       {"", "ConvTranspose", true},
                       {"ai.onnxtrain", "ConvGrad", true},
                       {"", "MaxPool", true},
                       {"", "AveragePool", true},
                       {"", "GlobalAveragePool", true},
                       {"", "GlobalMaxPool", true},
                       {"ai.onnxtrain", "MaxPoolGrad", true},
                       {"ai.onnxtrain", "AveragePoolGrad", true},
                       {"", "BatchNormalization", true},
                       {"ai.onnxtrain", "BatchNormalizationGrad", true},
                       {"", "LRN", true},
                       {"ai.onnxtrain", "LRNGrad", true},
                       {"", "Gemm", false},
                       {"", "MatMul", false}};

TEST(CudaNnRegistry, EveryOpHasACudaKernel) {
  for (const OpName& o : kOps) {
    const KernelEntry* entry = KernelRegistry::builtin().find(o.domain, o.op, DeviceKind::Cuda, DType::Float32);
    const bool expected = !o.cudnn || ONNXTRAIN_HAVE_CUDNN;
    EXPECT_EQ(entry != nullptr, expected) << o.op;
    if (entry) {
      EXPECT_EQ(entry->implementation, "cuda") << o.op;
    }
  }
}

#if ONNXTRAIN_HAVE_CUDNN
// Refusals happen before any cuDNN call, so they are checked without a GPU.
std::string prepare_error(const KernelCase& c) {
  const KernelSpec spec{c.op,      c.domain, c.opset, c.attributes, testing_support::input_descs(c.inputs),
                        c.outputs, "node7"};
  try {
    KernelRegistry::builtin().find(c.domain, c.op, DeviceKind::Cuda, DType::Float32)->prepare(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CudnnAlgorithmPick, DeterministicFirstUnlessTheEnvironmentSaysZero) {
  // Find's results, fastest first: a nondeterministic algorithm, one that failed, a deterministic one.
  cudnnConvolutionBwdFilterAlgoPerf_t results[3] = {};
  results[0] = {
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_STATUS_SUCCESS, 1.0f, 0, CUDNN_NON_DETERMINISTIC, CUDNN_FMA_MATH, {}};
  results[1] = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT,
                CUDNN_STATUS_NOT_SUPPORTED,
                1.5f,
                0,
                CUDNN_DETERMINISTIC,
                CUDNN_FMA_MATH,
                {}};
  results[2] = {
      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_STATUS_SUCCESS, 2.0f, 64, CUDNN_DETERMINISTIC, CUDNN_FMA_MATH, {}};
  EXPECT_EQ(cuda::pick_algorithm(results, 3, "backward-filter", true).algo, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
  EXPECT_EQ(cuda::pick_algorithm(results, 3, "backward-filter", false).algo, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0);
  EXPECT_EQ(cuda::pick_algorithm(results, 3, "backward-filter", true).workspace, 64u);
  // Without a deterministic one, the fastest that ran.
  EXPECT_EQ(cuda::pick_algorithm(results, 2, "backward-filter", true).algo, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0);
  EXPECT_TRUE(cuda::deterministic_only_setting(nullptr));
  EXPECT_TRUE(cuda::deterministic_only_setting("1"));
  EXPECT_FALSE(cuda::deterministic_only_setting("0"));
}

TEST(CudaNnPrepare, RefusalsNameTheAttributeAndNode) {
  std::mt19937 rng(5);
  const Tensor x = random_tensor(rng, {1, 2, 6, 6});
  // Asymmetric pads: X is padded explicitly (conv_padding.h), so the kernel prepares.
  EXPECT_EQ(prepare_error({.op = "Conv",
                           .attributes = {{"pads", Ints{0, 0, 1, 1}}},
                           .inputs = {x, random_tensor(rng, {3, 2, 2, 2})},
                           .outputs = {f32({1, 3, 6, 6})}}),
            "");
  // Four spatial dims: neither cuDNN nor the direct pooling kernel.
  const std::string rank = prepare_error({.op = "MaxPool",
                                          .attributes = {{"kernel_shape", Ints{1, 1, 1, 1}}},
                                          .inputs = {random_tensor(rng, {1, 1, 2, 2, 2, 2})},
                                          .outputs = {f32({1, 1, 2, 2, 2, 2})}});
  EXPECT_NE(rank.find("1 to 3 spatial dims"), std::string::npos) << rank;
  EXPECT_NE(rank.find("node7"), std::string::npos) << rank;
  // What cuDNN cannot pool goes to the direct kernel instead of failing (preparing it needs no GPU).
  EXPECT_EQ(prepare_error({.op = "MaxPool",
                           .attributes = {{"kernel_shape", Ints{2, 2}}},
                           .inputs = {x},
                           .outputs = {f32({1, 2, 5, 5}), {DType::Int64, {1, 2, 5, 5}}}}),
            "");
  EXPECT_EQ(
      prepare_error({.op = "AveragePool",
                     .attributes = {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}},
                     .inputs = {x},
                     .outputs = {f32({1, 2, 3, 3})}}),
      "");
  const std::string lrn = prepare_error(
      {.op = "LRN", .attributes = {{"size", int64_t{17}}}, .inputs = {x}, .outputs = {f32({1, 2, 6, 6})}});
  EXPECT_NE(lrn.find("size 17"), std::string::npos) << lrn;
  // The reference's validation comes first: a malformed attribute reads the same on every device.
  const std::string bad = prepare_error({.op = "Conv",
                                         .attributes = {{"group", int64_t{0}}},
                                         .inputs = {x, random_tensor(rng, {3, 2, 2, 2})},
                                         .outputs = {f32({1, 3, 5, 5})}});
  EXPECT_NE(bad.find("group must be >= 1"), std::string::npos) << bad;
}
#endif  // ONNXTRAIN_HAVE_CUDNN

// --- on a GPU: every kernel against the reference ---

void expect_agree(const KernelCase& c, const std::string& label) {
  SCOPED_TRACE(c.op + " " + label);
  const std::vector<Tensor> ours = run_cuda(c);
  const std::vector<Tensor> ref = run_reference(c);
  for (size_t o = 0; o < ours.size(); ++o) {
    if (!c.outputs[o].present()) continue;
    if (c.outputs[o].dtype == DType::Int64) {  // MaxPool's Indices
      EXPECT_EQ(testing_support::values<int64_t>(ours[o]), testing_support::values<int64_t>(ref[o])) << "output " << o;
      continue;
    }
    int failures = 0;
    for (int64_t i = 0; i < ours[o].numel() && failures < 5; ++i) {
      const float a = ours[o].data<float>()[i], b = ref[o].data<float>()[i];
      if (!(std::fabs(a - b) <= 1e-5 + 1e-4 * std::fabs(b))) {
        ADD_FAILURE() << "output " << o << " element " << i << ": cuda " << a << ", reference " << b;
        ++failures;
      }
    }
  }
}

#if ONNXTRAIN_HAVE_CUDNN
TEST_F(CudaNnKernels, ConvForwardBackwardAndTranspose) {
  const Tensor x = r({2, 4, 7, 7}), w = r({6, 2, 3, 3}), b = r({6});
  const Attributes a{{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}, {"group", int64_t{2}}};
  expect_agree({.op = "Conv", .attributes = a, .inputs = {x, w, b}, .outputs = {f32({2, 6, 4, 4})}}, "2-D group");
  expect_agree({.op = "Conv",
                .attributes = {{"dilations", Ints{2}}},
                .inputs = {r({2, 3, 10}), r({4, 3, 3})},
                .outputs = {f32({2, 4, 6})}},
               "1-D dilated");
  expect_agree({.op = "Conv",
                .attributes = {{"pads", Ints{1, 1, 1, 1, 1, 1}}},
                .inputs = {r({1, 2, 4, 4, 4}), r({3, 2, 3, 3, 3}), r({3})},
                .outputs = {f32({1, 3, 4, 4, 4})}},
               "3-D");
  const Tensor dy = r({2, 6, 4, 4});
  expect_agree({.op = "ConvGrad",
                .attributes = a,
                .inputs = {dy, x, w},
                .outputs = {f32({2, 4, 7, 7}), f32({6, 2, 3, 3}), f32({6})},
                .domain = "ai.onnxtrain"},
               "all grads");
  expect_agree({.op = "ConvGrad",
                .attributes = a,
                .inputs = {dy, x, w},
                .outputs = {{}, f32({6, 2, 3, 3}), {}},
                .domain = "ai.onnxtrain"},
               "dW only");
  expect_agree({.op = "ConvTranspose",
                .attributes = {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"output_padding", Ints{1, 1}}},
                .inputs = {r({1, 4, 5, 5}), r({4, 3, 3, 3}), r({3})},
                .outputs = {f32({1, 3, 10, 10})}},
               "strided");
}

TEST_F(CudaNnKernels, Pooling) {
  const Tensor x = r({2, 3, 8, 8});
  const Attributes window{{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}};
  expect_agree({.op = "MaxPool", .attributes = window, .inputs = {x}, .outputs = {f32({2, 3, 4, 4})}}, "max");
  for (int64_t include : {0, 1}) {
    Attributes a = window;
    a["count_include_pad"] = include;
    expect_agree({.op = "AveragePool", .attributes = a, .inputs = {x}, .outputs = {f32({2, 3, 4, 4})}}, "avg");
    expect_agree({.op = "AveragePoolGrad",
                  .attributes = a,
                  .inputs = {r({2, 3, 4, 4}), Tensor::vector_int64({2, 3, 8, 8})},
                  .outputs = {f32({2, 3, 8, 8})},
                  .domain = "ai.onnxtrain"},
                 "avg grad");
  }
  expect_agree({.op = "MaxPoolGrad",
                .attributes = window,
                .inputs = {r({2, 3, 4, 4}), x},
                .outputs = {f32({2, 3, 8, 8})},
                .domain = "ai.onnxtrain"},
               "max grad");
  // Tied maxima (ReLU zeros are the common case): dY goes to the first maximum in window order.
  Tensor ties = x.clone();
  for (float& v : ties.data<float>()) v = std::max(0.0f, std::round(v));
  expect_agree({.op = "MaxPoolGrad",
                .attributes = window,
                .inputs = {r({2, 3, 4, 4}), ties},
                .outputs = {f32({2, 3, 8, 8})},
                .domain = "ai.onnxtrain"},
               "max grad with ties");
  expect_agree({.op = "MaxPool",
                .attributes = {{"kernel_shape", Ints{2}}},
                .inputs = {r({2, 3, 9})},
                .outputs = {f32({2, 3, 8})}},
               "1-D");
  // What cuDNN cannot pool: the direct kernels.
  expect_agree({.op = "MaxPool",
                .attributes = {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}},
                .inputs = {r({2, 3, 7, 6})},
                .outputs = {f32({2, 3, 3, 3}), {DType::Int64, {2, 3, 3, 3}}}},
               "ceil_mode with Indices");
  const Attributes asymmetric{
      {"kernel_shape", Ints{2, 3}}, {"pads", Ints{0, 1, 1, 0}}, {"count_include_pad", int64_t{1}}};
  expect_agree({.op = "AveragePool", .attributes = asymmetric, .inputs = {x}, .outputs = {f32({2, 3, 8, 7})}},
               "asymmetric pads");
  expect_agree({.op = "AveragePoolGrad",
                .attributes = asymmetric,
                .inputs = {r({2, 3, 8, 7}), Tensor::vector_int64({2, 3, 8, 8})},
                .outputs = {f32({2, 3, 8, 8})},
                .domain = "ai.onnxtrain"},
               "asymmetric pads grad");
  expect_agree({.op = "MaxPoolGrad",
                .attributes = {{"kernel_shape", Ints{3}}, {"dilations", Ints{2}}},
                .inputs = {r({2, 3, 5}), r({2, 3, 9})},
                .outputs = {f32({2, 3, 9})},
                .domain = "ai.onnxtrain"},
               "dilated grad");
  expect_agree({.op = "GlobalAveragePool", .inputs = {r({2, 3, 5, 6})}, .outputs = {f32({2, 3, 1, 1})}}, "global avg");
  expect_agree({.op = "GlobalMaxPool", .inputs = {r({2, 3, 5})}, .outputs = {f32({2, 3, 1})}}, "global max 1-D");
}

TEST_F(CudaNnKernels, BatchNormalization) {
  const Tensor x = r({4, 3, 5, 2}), scale = r({3}), bias = r({3}), mean = r({3});
  const Tensor var = random_tensor(rng, {3}, 0.5, 2);
  expect_agree(
      {.op = "BatchNormalization", .opset = 15, .inputs = {x, scale, bias, mean, var}, .outputs = {f32({4, 3, 5, 2})}},
      "inference");
  expect_agree({.op = "BatchNormalization",
                .opset = 15,
                .attributes = {{"training_mode", int64_t{1}}, {"momentum", 0.8}},
                .inputs = {x, scale, bias, mean, var},
                .outputs = {f32({4, 3, 5, 2}), f32({3}), f32({3})}},
               "training");
  // One value per channel: the unbiased variance is 0/0 for cuDNN; the reference's running variance
  // keeps momentum · var, and Y is the bias.
  expect_agree({.op = "BatchNormalization",
                .opset = 15,
                .attributes = {{"training_mode", int64_t{1}}, {"momentum", 0.8}},
                .inputs = {r({1, 3, 1, 1}), scale, bias, mean, var},
                .outputs = {f32({1, 3, 1, 1}), f32({3}), f32({3})}},
               "training, one value per channel");
  expect_agree({.op = "BatchNormalization",
                .opset = 9,
                .inputs = {x, scale, bias, mean, var},
                .outputs = {f32({4, 3, 5, 2}), f32({3}), f32({3}), f32({3}), f32({3})}},
               "opset 9 saved statistics");
  for (int64_t training : {0, 1}) {
    expect_agree({.op = "BatchNormalizationGrad",
                  .attributes = {{"training_mode", training}},
                  .inputs = {r({4, 3, 5, 2}), x, scale, mean, var},
                  .outputs = {f32({4, 3, 5, 2}), f32({3}), f32({3})},
                  .domain = "ai.onnxtrain"},
                 training ? "grad training" : "grad frozen");
  }
  // An empty batch: dScale and dBias are sums over nothing, zeros as the reference writes them.
  const Tensor empty = r({0, 3, 5, 2});
  expect_agree({.op = "BatchNormalizationGrad",
                .attributes = {{"training_mode", int64_t{0}}},
                .inputs = {empty, empty, scale, mean, var},
                .outputs = {f32({0, 3, 5, 2}), f32({3}), f32({3})},
                .domain = "ai.onnxtrain"},
               "grad of an empty batch");
}

TEST_F(CudaNnKernels, Lrn) {
  const Tensor x = r({2, 7, 3, 3});
  for (int64_t size : {3, 4}) {
    const Attributes a{{"size", size}, {"alpha", 0.3}, {"beta", 0.6}, {"bias", 1.5}};
    expect_agree({.op = "LRN", .attributes = a, .inputs = {x}, .outputs = {f32({2, 7, 3, 3})}}, "forward");
    expect_agree({.op = "LRNGrad",
                  .attributes = a,
                  .inputs = {r({2, 7, 3, 3}), x},
                  .outputs = {f32({2, 7, 3, 3})},
                  .domain = "ai.onnxtrain"},
                 "grad");
  }
}
#endif  // ONNXTRAIN_HAVE_CUDNN

TEST_F(CudaNnKernels, GemmAndMatMul) {
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1}) {
      const Attributes a{{"transA", ta}, {"transB", tb}, {"alpha", 0.5}, {"beta", 2.0}};
      const Tensor am = r(ta ? Ints{4, 3} : Ints{3, 4}), bm = r(tb ? Ints{5, 4} : Ints{4, 5});
      expect_agree({.op = "Gemm", .attributes = a, .inputs = {am, bm, r({5})}, .outputs = {f32({3, 5})}}, "C row");
      expect_agree({.op = "Gemm", .attributes = a, .inputs = {am, bm, r({3, 5})}, .outputs = {f32({3, 5})}}, "C full");
      expect_agree({.op = "Gemm", .attributes = a, .inputs = {am, bm}, .outputs = {f32({3, 5})}}, "no C");
    }
  const std::vector<std::pair<Ints, Ints>> shapes = {
      {{3, 4}, {4, 5}},          {{4}, {4, 5}},          {{3, 4}, {4}},      {{2, 3, 4}, {4, 5}},
      {{2, 1, 3, 4}, {5, 4, 2}}, {{6, 3, 4}, {6, 4, 2}}, {{3, 4}, {6, 4, 5}}};
  for (const auto& [sa, sb] : shapes) {
    const cuda::MatMulPlan plan = cuda::plan_matmul(sa, sb);
    expect_agree({.op = "MatMul", .inputs = {r(sa), r(sb)}, .outputs = {f32(plan.y_sizes)}},
                 reference::sizes_to_string(sa) + " x " + reference::sizes_to_string(sb));
  }
}

#endif  // ONNXTRAIN_WITH_CUDA

}  // namespace
