// The elementwise CUDA kernels. On the CPU (everywhere): the shared host/device functors of
// kernels/elementwise_functors.h against std:: math and known values, Cast's functor against the reference
// Cast kernel, the broadcast geometry the CUDA launches use against a naive numpy index mapping, and the
// CUDA Dropout kernel's per-thread Philox draws (run on the host) against the reference kernel's mask. On
// a GPU (skipped, saying so, when none is visible): every elementwise CUDA kernel against the reference
// kernel on the same inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/cuda/cuda_runtime.h"
#include "kernels/cuda/elementwise_broadcast.h"
#include "kernels/elementwise_functors.h"
#include "kernels/kernel.h"
#include "kernels/philox.h"
#include "kernels/reference/common.h"  // broadcast_sizes
#include "kernels/reference/element_convert.h"
#include "tests/reference_kernel_call.h"

using namespace onnxtrain;
using namespace onnxtrain::testing_support;
namespace ew = onnxtrain::elementwise;

namespace {

const double kPoints[] = {-30.0, -4.5, -3.0, -1.25, -0.5, -1e-3, 0.0, 1e-3, 0.5, 1.0, 2.75, 3.0, 6.5, 40.0};

template <typename T>
class FloatFunctors : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(FloatFunctors, FloatTypes);

// Each activation against its textbook formula (evaluated in long double where that is the stabler way).
TYPED_TEST(FloatFunctors, UnaryMatchTextbookFormulas) {
  using T = TypeParam;
  const double tol = std::is_same_v<T, float> ? 2e-6 : 1e-14;
  auto near = [&](T got, long double want, double x, const char* op) {
    EXPECT_NEAR(static_cast<double>(got), static_cast<double>(want), tol * std::max(1.0, std::fabs(double(want))))
        << op << " at " << x;
  };
  for (double xd : kPoints) {
    const T x = static_cast<T>(xd);
    const long double lx = x;
    near(ew::Relu<T>{}(x), lx > 0 ? lx : 0, xd, "Relu");
    near(ew::Neg<T>{}(x), -lx, xd, "Neg");
    near(ew::Abs<T>{}(x), std::fabs(lx), xd, "Abs");
    near(ew::Sigmoid<T>{}(x), 1 / (1 + std::exp(-lx)), xd, "Sigmoid");
    near(ew::Tanh<T>{}(x), std::tanh(lx), xd, "Tanh");
    near(ew::Exp<T>{}(x), std::exp(lx), xd, "Exp");
    near(ew::Erf<T>{}(x), std::erf(lx), xd, "Erf");
    near(ew::Softplus<T>{}(x), std::log1p(std::exp(lx)), xd, "Softplus");
    near(ew::LeakyRelu<T>{T(0.1)}(x), lx < 0 ? static_cast<long double>(T(0.1)) * lx : lx, xd, "LeakyRelu");
    near(ew::Elu<T>{T(1.5)}(x), lx < 0 ? 1.5L * std::expm1(lx) : lx, xd, "Elu");
    near(ew::HardSigmoid<T>{T(0.2), T(0.5)}(x), std::clamp(static_cast<long double>(T(0.2)) * lx + 0.5L, 0.0L, 1.0L),
         xd, "HardSigmoid");
    near(ew::HardSwish<T>{}(x), lx * std::clamp(lx / 6 + 0.5L, 0.0L, 1.0L), xd, "HardSwish");
    near(ew::GeluErf<T>{}(x), 0.5L * lx * (1 + std::erf(lx / std::sqrt(2.0L))), xd, "GeluErf");
    const long double u = std::sqrt(2.0L / 3.14159265358979323846264338327950288L) * (lx + 0.044715L * lx * lx * lx);
    near(ew::GeluTanh<T>{}(x), 0.5L * lx * (1 + std::tanh(u)), xd, "GeluTanh");
    if (xd > 0) {
      near(ew::Sqrt<T>{}(x), std::sqrt(lx), xd, "Sqrt");
      near(ew::Log<T>{}(x), std::log(lx), xd, "Log");
      near(ew::Reciprocal<T>{}(x), 1 / lx, xd, "Reciprocal");
    }
  }
  // Selu with ONNX's defaults: gamma·x above 0, gamma·alpha·(e^x - 1) below.
  const ew::Selu<T> selu{T(1.67326319217681884765625), T(1.05070102214813232421875)};
  near(selu(T(2)), 2.0L * static_cast<long double>(T(1.05070102214813232421875)), 2, "Selu");
  EXPECT_NEAR(double(selu(T(-40))), -1.7580993408473766, 1e-6);  // -gamma·alpha, the saturation value
}

TYPED_TEST(FloatFunctors, StableAtTheExtremes) {
  using T = TypeParam;
  EXPECT_EQ(ew::Sigmoid<T>{}(T(-1000)), T(0));
  EXPECT_EQ(ew::Sigmoid<T>{}(T(1000)), T(1));
  EXPECT_EQ(ew::Softplus<T>{}(T(1000)), T(1000));  // no exp overflow
  EXPECT_EQ(ew::Softplus<T>{}(T(-1000)), T(0));
  EXPECT_TRUE(std::isnan(ew::Clip<T>{T(0), T(1)}(std::numeric_limits<T>::quiet_NaN())));
  EXPECT_EQ((ew::Clip<T>{T(-1), T(2)}(T(5))), T(2));
  EXPECT_EQ((ew::Clip<T>{T(-1), T(2)}(T(-5))), T(-1));
  EXPECT_EQ((ew::Clip<T>{T(3), T(2)}(T(0))), T(2));  // min > max gives max, as the spec says
  EXPECT_EQ((ew::HardSigmoid<T>{T(0.2), T(0.5)}(T(10))), T(1));
  EXPECT_EQ(ew::HardSwish<T>{}(T(-4)), T(0));
  EXPECT_EQ(ew::HardSwish<T>{}(T(4)), T(4));
}

TYPED_TEST(FloatFunctors, BinaryAndVariadic) {
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  EXPECT_EQ(ew::Add<T>{}(T(1.5), T(2.25)), T(3.75));
  EXPECT_EQ(ew::Sub<T>{}(T(1.5), T(2.25)), T(-0.75));
  EXPECT_EQ(ew::Mul<T>{}(T(1.5), T(-2)), T(-3));
  EXPECT_EQ(ew::Div<T>{}(T(3), T(4)), T(0.75));
  EXPECT_TRUE(std::isinf(ew::Div<T>{}(T(1), T(0))));
  EXPECT_EQ((ew::Pow<T, T>{}(T(2), T(10))), T(1024));
  EXPECT_EQ((ew::Pow<T, int64_t>{}(T(-2), int64_t{3})), T(-8));
  EXPECT_NEAR(double(ew::Pow<T, T>{}(T(2), T(0.5))), std::sqrt(2.0), 1e-6);
  EXPECT_EQ(ew::PRelu<T>{}(T(-2), T(0.25)), T(-0.5));
  EXPECT_EQ(ew::PRelu<T>{}(T(2), T(0.25)), T(2));
  EXPECT_TRUE(std::isnan(ew::Max<T>{}.combine(T(1), nan)));
  EXPECT_TRUE(std::isnan(ew::Min<T>{}.combine(nan, T(1))));
  EXPECT_EQ(ew::Max<T>{}.combine(T(1), T(3)), T(3));
  EXPECT_EQ(ew::Min<T>{}.combine(T(1), T(3)), T(1));
  EXPECT_EQ(ew::Mean<T>{}.finish(ew::Mean<T>{}.combine(T(1), T(2)), 2), T(1.5));
  EXPECT_EQ(ew::Sum<T>{}.finish(T(7), 3), T(7));
}

TEST(IntegerFunctors, WrapTruncateAndSaturate) {
  const int32_t int_min = std::numeric_limits<int32_t>::min(), int_max = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(ew::Neg<int32_t>{}(int_min), int_min);  // wraps, no UB
  EXPECT_EQ(ew::Abs<int32_t>{}(int_min), int_min);
  EXPECT_EQ(ew::Abs<int64_t>{}(-5), 5);
  EXPECT_EQ(ew::Relu<int64_t>{}(-5), 0);
  EXPECT_EQ(ew::Add<int32_t>{}(int_max, 1), int_min);
  EXPECT_EQ(ew::Mul<int32_t>{}(65536, 65536), 0);
  EXPECT_EQ(ew::Sub<int64_t>{}(3, 5), -2);
  EXPECT_EQ(ew::Div<int32_t>{}(-7, 2), -3);  // truncates toward zero
  EXPECT_EQ(ew::Div<int32_t>{}(int_min, -1), int_min);
  EXPECT_EQ(ew::Div<int64_t>{}(5, 0), 0);  // what a device writes; the reference throws first
  EXPECT_EQ(ew::Max<int64_t>{}.combine(-3, 4), 4);
  EXPECT_EQ((ew::Clip<int64_t>{-2, 2}(9)), 2);
  EXPECT_EQ((ew::cast_value<int32_t>(3.99f)), 3);
  EXPECT_EQ((ew::cast_value<int32_t>(-3.99)), -3);
  EXPECT_EQ((ew::cast_value<int32_t>(std::nan(""))), 0);
  EXPECT_EQ((ew::cast_value<int32_t>(1e20)), int_max);
  EXPECT_EQ((ew::cast_value<int64_t>(-1e30f)), std::numeric_limits<int64_t>::min());
  EXPECT_EQ((ew::cast_value<bool>(0.5f)), true);
  EXPECT_EQ((ew::cast_value<bool>(int64_t{0})), false);
  EXPECT_EQ((ew::cast_value<float>(true)), 1.0f);
}

TEST(CompareLogicFunctors, KnownValues) {
  EXPECT_TRUE(ew::Equal{}(2.0f, 2.0f));
  EXPECT_FALSE(ew::Equal{}(std::nan(""), std::nan("")));
  EXPECT_TRUE(ew::Less{}(int64_t{-1}, int64_t{0}));
  EXPECT_TRUE(ew::LessOrEqual{}(1, 1));
  EXPECT_FALSE(ew::Greater{}(1.0, 1.0));
  EXPECT_TRUE(ew::GreaterOrEqual{}(1.0, 1.0));
  EXPECT_TRUE(ew::And{}(true, true));
  EXPECT_FALSE(ew::And{}(true, false));
  EXPECT_TRUE(ew::Or{}(false, true));
  EXPECT_TRUE(ew::Xor{}(false, true));
  EXPECT_FALSE(ew::Xor{}(true, true));
}

// cast_value against the reference Cast kernel (kernels/reference/cast.cc), which converts on its own.
TEST(CastFunctor, MatchesReferenceCastKernel) {
  const std::vector<double> inputs = {-1e30, -3e9, -2.5, -1.0, -0.75, 0.0, 0.25, 1.0, 2.9, 3e9, 1e30, std::nan("")};
  Tensor x(DType::Float64, {static_cast<int64_t>(inputs.size())});
  std::copy(inputs.begin(), inputs.end(), x.data<double>().begin());
  const auto cast_to = [&](DType to, int64_t onnx_code) {
    return run1({.op = "Cast", .attributes = {{"to", onnx_code}}, .inputs = {x}, .outputs = {{to, x.sizes()}}});
  };
  const std::vector<int32_t> i32 = values<int32_t>(cast_to(DType::Int32, 6));
  const std::vector<int64_t> i64 = values<int64_t>(cast_to(DType::Int64, 7));
  const std::vector<float> f32 = values<float>(cast_to(DType::Float32, 1));
  const std::vector<uint8_t> b = values<uint8_t>(cast_to(DType::Bool, 9));
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(ew::cast_value<int32_t>(inputs[i]), i32[i]) << inputs[i];
    EXPECT_EQ(ew::cast_value<int64_t>(inputs[i]), i64[i]) << inputs[i];
    const float f = ew::cast_value<float>(inputs[i]);
    EXPECT_TRUE(std::memcmp(&f, &f32[i], sizeof f) == 0) << inputs[i];
    EXPECT_EQ(ew::cast_value<bool>(inputs[i]) ? 1 : 0, b[i]) << inputs[i];
  }
}

// --- broadcast geometry ---

// Input k's offset of output element `flat` by the numpy rule, computed the slow, obvious way.
int64_t naive_offset(const std::vector<int64_t>& out, const std::vector<int64_t>& in, int64_t flat) {
  std::vector<int64_t> index(out.size());
  for (size_t d = out.size(); d-- > 0;) {
    index[d] = flat % out[d];
    flat /= out[d];
  }
  int64_t offset = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t coordinate = in[i] == 1 ? 0 : index[out.size() - in.size() + i];
    offset = offset * in[i] + coordinate;
  }
  return offset;
}

void expect_geometry_matches(const std::vector<int64_t>& out, const std::vector<std::vector<int64_t>>& ins) {
  const std::optional<cuda::BroadcastGeometry> g = cuda::make_broadcast_geometry(out, ins);
  ASSERT_TRUE(g.has_value());
  int64_t numel = 1;
  for (int64_t s : out) numel *= s;
  ASSERT_EQ(g->numel, numel);
  int64_t offsets[cuda::kMaxBroadcastInputs];
  for (int64_t i = 0; i < numel; ++i) {
    g->input_offsets(i, offsets);
    for (size_t k = 0; k < ins.size(); ++k) {
      ASSERT_EQ(offsets[k], naive_offset(out, ins[k], i)) << "element " << i << " input " << k;
      if (g->flat()) {
        ASSERT_EQ(offsets[k], i * g->strides[k][0]);  // what the flat kernels compute
      }
    }
  }
}

TEST(BroadcastGeometry, MergesContiguousAndBroadcastDims) {
  // Same sizes everywhere: one flat dim of stride 1.
  auto g = cuda::make_broadcast_geometry({2, 3, 4}, {{2, 3, 4}, {2, 3, 4}});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->rank, 1);
  EXPECT_EQ(g->sizes[0], 24);
  EXPECT_EQ(g->strides[1][0], 1);
  // A scalar operand: still flat, stride 0.
  g = cuda::make_broadcast_geometry({2, 3, 4}, {{2, 3, 4}, {}});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->rank, 1);
  EXPECT_EQ(g->strides[1][0], 0);
  // A bias over channels of NCHW: (N, C, H·W) after merging H and W.
  g = cuda::make_broadcast_geometry({8, 16, 5, 5}, {{8, 16, 5, 5}, {16, 1, 1}});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->rank, 3);
  EXPECT_EQ(g->sizes[2], 25);
  // A scalar output, and a size-1 one.
  g = cuda::make_broadcast_geometry({}, {{}, {}});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->numel, 1);
  EXPECT_EQ(g->rank, 1);
  expect_geometry_matches({}, {{}, {}});
  expect_geometry_matches({1}, {{}, {1}});
  // An input of higher rank than the output cannot broadcast onto it.
  EXPECT_FALSE(cuda::make_broadcast_geometry({3}, {{1, 3}, {3}}).has_value());
}

TEST(BroadcastGeometry, MatchesNaiveIndexMapping) {
  expect_geometry_matches({2, 3, 4}, {{3, 1}, {2, 1, 4}});
  expect_geometry_matches({5, 1, 3}, {{5, 1, 3}, {1}, {3}});
  expect_geometry_matches({0, 3}, {{0, 3}, {3}});  // empty output
  // Random shapes up to rank 6 with random size-1 and missing dims, two and three inputs.
  std::mt19937 rng(20261130);
  for (int trial = 0; trial < 300; ++trial) {
    const int rank = static_cast<int>(rng() % 7);
    std::vector<int64_t> out(static_cast<size_t>(rank));
    for (int64_t& s : out) s = 1 + static_cast<int64_t>(rng() % 4);
    const int inputs = 2 + static_cast<int>(rng() % 2);
    std::vector<std::vector<int64_t>> ins;
    for (int k = 0; k < inputs; ++k) {
      const size_t in_rank = rank == 0 ? 0 : rng() % (rank + 1);
      std::vector<int64_t> in(out.end() - static_cast<int64_t>(in_rank), out.end());
      for (int64_t& s : in)
        if (rng() % 3 == 0) s = 1;
      ins.push_back(in);
    }
    SCOPED_TRACE("trial " + std::to_string(trial));
    expect_geometry_matches(out, ins);
  }
}

TEST(BroadcastGeometry, RefusesTooManyDimsOrInputs) {
  // Nine dims that cannot merge: the inputs alternate between broadcasting and not.
  const std::vector<int64_t> out = {2, 2, 2, 2, 2, 2, 2, 2, 2};
  const std::vector<int64_t> a = {2, 1, 2, 1, 2, 1, 2, 1, 2};
  const std::vector<int64_t> b = {1, 2, 1, 2, 1, 2, 1, 2, 1};
  EXPECT_FALSE(cuda::make_broadcast_geometry(out, {a, b}).has_value());
  EXPECT_TRUE(cuda::make_broadcast_geometry(out, {out, out}).has_value());  // merges to one dim
  EXPECT_FALSE(cuda::make_broadcast_geometry({2}, {{2}, {2}, {2}, {2}}).has_value());
}

// --- Dropout: the CUDA kernel's per-thread draws give the reference mask ---

// dropout_kernel's thread p computes the Philox block of pair p and keeps elements 2p and 2p + 1 (when
// below n) by dropout_keeps: the same calls on the host, for an odd element count (the last pair is half
// used), equal the reference kernel's mask element for element.
TEST(DropoutDraws, DevicePairsReproduceTheReferenceMask) {
  Tensor x(DType::Float32, {7, 33});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 11) - 5.0f;
  Tensor ratio(DType::Float32, {});
  ratio.data<float>()[0] = 0.3f;
  Tensor training(DType::Bool, {});
  training.data<uint8_t>()[0] = 1;
  const int64_t seed = 1234;
  for (uint64_t run_index : {uint64_t{0}, uint64_t{5}}) {
    KernelSpec spec{.op_type = "Dropout", .opset = 13, .attributes = {{"seed", seed}}, .node_name = "d"};
    spec.inputs = input_descs({x, ratio, training});
    spec.outputs = {{DType::Float32, x.sizes()}, {DType::Bool, x.sizes()}};
    const KernelEntry* entry =
        KernelRegistry::builtin().find("", "Dropout", DeviceKind::Cpu, DType::Float32, "reference");
    ASSERT_NE(entry, nullptr);
    const std::vector<Tensor> ys = run_prepared(*entry->prepare(spec), {x, ratio, training}, spec.outputs, run_index);
    const uint64_t stream_seed = random_stream_seed(static_cast<uint64_t>(seed), run_index);
    const int64_t n = x.numel();
    int64_t kept = 0;
    for (int64_t p = 0; p < (n + 1) / 2; ++p) {  // one device thread
      const DropoutDrawPair d = dropout_draw_pair(stream_seed, static_cast<uint64_t>(p));
      for (int half = 0; half < 2 && 2 * p + half < n; ++half) {
        const int64_t i = 2 * p + half;
        const bool keep = dropout_keeps(half == 0 ? d.even : d.odd, static_cast<double>(0.3f));
        ASSERT_EQ(keep ? 1 : 0, ys[1].data<uint8_t>()[i]) << "element " << i << " run " << run_index;
        kept += keep;
      }
    }
    EXPECT_GT(kept, n / 2);  // about 70% survive
    EXPECT_LT(kept, n * 9 / 10);
  }
}

// --- on a GPU: every elementwise CUDA kernel against the reference kernel ---

bool have_gpu() { return cuda::device_count() > 0; }

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible"

// Deterministic values in [lo, hi] (no zeros unless lo <= 0 <= hi lands on one).
template <typename T>
Tensor filled(DType dtype, std::vector<int64_t> sizes, double lo, double hi, uint32_t seed) {
  Tensor t(dtype, std::move(sizes));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (T& v : t.data<T>()) v = static_cast<T>(u(rng));
  return t;
}
Tensor f32(std::vector<int64_t> sizes, double lo = -3, double hi = 3, uint32_t seed = 1) {
  return filled<float>(DType::Float32, std::move(sizes), lo, hi, seed);
}
Tensor f64(std::vector<int64_t> sizes, double lo = -3, double hi = 3, uint32_t seed = 2) {
  return filled<double>(DType::Float64, std::move(sizes), lo, hi, seed);
}
Tensor i64(std::vector<int64_t> sizes, double lo = -50, double hi = 50, uint32_t seed = 3) {
  return filled<int64_t>(DType::Int64, std::move(sizes), lo, hi, seed);
}
Tensor i32(std::vector<int64_t> sizes, double lo = -50, double hi = 50, uint32_t seed = 4) {
  return filled<int32_t>(DType::Int32, std::move(sizes), lo, hi, seed);
}
Tensor bools(std::vector<int64_t> sizes, uint32_t seed = 5) {
  Tensor t(DType::Bool, std::move(sizes));
  std::mt19937 rng(seed);
  for (uint8_t& v : t.data<uint8_t>()) v = static_cast<uint8_t>(rng() % 2);
  return t;
}
Tensor scalar_f32(float v) {
  Tensor t(DType::Float32, {});
  t.data<float>()[0] = v;
  return t;
}
Tensor scalar_f64(double v) {
  Tensor t(DType::Float64, {});
  t.data<double>()[0] = v;
  return t;
}
Tensor scalar_bool(bool v) {
  Tensor t(DType::Bool, {});
  t.data<uint8_t>()[0] = v ? 1 : 0;
  return t;
}

// Runs `c` with the CUDA kernel on cuda:0 and returns the outputs on the host.
std::vector<Tensor> run_on_cuda(const KernelCase& c, uint64_t run_index) {
  const KernelSpec spec = testing_support::spec_of(c);
  const KernelEntry* entry =
      KernelRegistry::builtin().find(c.domain, c.op, DeviceKind::Cuda, kernel_dtype(spec), "cuda");
  if (entry == nullptr) throw Error("no CUDA kernel for " + c.op);
  std::unique_ptr<Kernel> kernel = entry->prepare(spec);
  cuda::DeviceStream stream(0);
  std::vector<cuda::DeviceBuffer> buffers;
  std::vector<TensorView> in, out;
  for (const Tensor& t : c.inputs) {
    if (t.dtype() == DType::Undefined) {  // an omitted optional input
      in.push_back(TensorView{});
      continue;
    }
    buffers.emplace_back(stream, std::max<size_t>(t.nbytes(), 1));
    if (t.nbytes() > 0) cuda::copy_to_device(buffers.back().data(), t.raw(), t.nbytes(), stream);
    in.push_back({t.dtype(), t.sizes(), buffers.back().data(), DeviceKind::Cuda});
  }
  std::vector<Tensor> results;
  for (const TensorDesc& d : c.outputs) results.push_back(d.present() ? Tensor(d.dtype, d.sizes) : Tensor());
  for (Tensor& t : results) {
    if (t.dtype() == DType::Undefined) {
      out.push_back(TensorView{});
      continue;
    }
    buffers.emplace_back(stream, std::max<size_t>(t.nbytes(), 1));
    out.push_back({t.dtype(), t.sizes(), buffers.back().data(), DeviceKind::Cuda});
  }
  Stream kernel_stream = stream.kernel_stream(run_index);
  kernel->run(kernel_stream, in, out);
  for (size_t i = 0; i < results.size(); ++i)
    if (results[i].nbytes() > 0) cuda::copy_to_host(results[i].raw(), out[i].data, results[i].nbytes(), stream);
  stream.synchronize();
  return results;
}

// CUDA vs reference: bit-exact for everything but the libm functions, which CUDA computes within a few
// ulp of glibc (relative tolerance `rtol` for float32; float64 gets 1e-12). The elementwise .cu files
// are compiled with --fmad=false, so a·x + b rounds on the device as on the host.
void expect_cuda_matches_reference(const KernelCase& c, double rtol = 0, uint64_t run_index = 0) {
  SCOPED_TRACE(c.op);
  const KernelSpec spec = testing_support::spec_of(c);
  const KernelEntry* reference =
      KernelRegistry::builtin().find(c.domain, c.op, DeviceKind::Cpu, kernel_dtype(spec), "reference");
  ASSERT_NE(reference, nullptr);
  const std::vector<Tensor> want = run_prepared(*reference->prepare(spec), c.inputs, c.outputs, run_index);
  const std::vector<Tensor> got = run_on_cuda(c, run_index);
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    if (want[o].dtype() == DType::Undefined) continue;
    ASSERT_EQ(got[o].dtype(), want[o].dtype());
    ASSERT_EQ(got[o].nbytes(), want[o].nbytes());
    const auto compare = [&](auto zero, double tolerance) {
      using T = decltype(zero);
      const auto g = got[o].data<T>();
      const auto w = want[o].data<T>();
      for (size_t i = 0; i < w.size(); ++i) {
        if (std::isnan(w[i])) {
          EXPECT_TRUE(std::isnan(g[i])) << "output " << o << " element " << i;
        } else if (tolerance == 0) {
          EXPECT_EQ(g[i], w[i]) << "output " << o << " element " << i;
        } else {
          EXPECT_NEAR(g[i], w[i], tolerance * std::max<double>(1.0, std::fabs(w[i])))
              << "output " << o << " element " << i;
        }
      }
    };
    if (want[o].dtype() == DType::Float32) {
      compare(float{}, rtol);
    } else if (want[o].dtype() == DType::Float64) {
      compare(double{}, rtol == 0 ? 0 : 1e-12);
    } else {
      EXPECT_EQ(std::memcmp(got[o].raw(), want[o].raw(), want[o].nbytes()), 0) << "output " << o << " differs";
    }
  }
}

KernelCase unary(const std::string& op, Tensor x, Attributes attributes = {}) {
  const TensorDesc out{x.dtype(), x.sizes()};
  return {.op = op, .attributes = std::move(attributes), .inputs = {std::move(x)}, .outputs = {out}};
}

TEST(CudaElementwise, UnaryOps) {
  REQUIRE_GPU();
  const double libm = 4e-6;  // a few float32 ulp
  for (const char* op : {"Relu", "Neg", "Abs"}) {
    expect_cuda_matches_reference(unary(op, f32({3, 1000})));
    expect_cuda_matches_reference(unary(op, f64({77})));
    expect_cuda_matches_reference(unary(op, i32({64})));
    expect_cuda_matches_reference(unary(op, i64({64})));
  }
  for (const char* op : {"Sigmoid", "Tanh", "Exp", "Erf", "Softplus", "HardSwish", "Selu", "Elu", "LeakyRelu",
                         "HardSigmoid", "Gelu", "Reciprocal", "Sin", "Cos", "Ceil", "Floor"}) {
    expect_cuda_matches_reference(unary(op, f32({5, 4099}, -8, 8)), libm);
    expect_cuda_matches_reference(unary(op, f64({333}, -8, 8)), libm);
  }
  for (const char* op : {"Sqrt", "Log"}) {
    expect_cuda_matches_reference(unary(op, f32({2049}, 0.01, 50)), libm);
    expect_cuda_matches_reference(unary(op, f64({100}, 0.01, 50)), libm);
  }
  expect_cuda_matches_reference(unary("Gelu", f32({999}, -6, 6), {{{"approximate", std::string("tanh")}}}), libm);
  expect_cuda_matches_reference(unary("LeakyRelu", f32({999}), {{{"alpha", 0.3}}}));
  expect_cuda_matches_reference(unary("Elu", f32({999}), {{{"alpha", 0.7}}}), libm);
  expect_cuda_matches_reference(unary("HardSigmoid", f32({999}), {{{"alpha", 0.3}, {"beta", 0.4}}}));
  expect_cuda_matches_reference(unary("Relu", f32({0})));  // empty tensors launch nothing
}

TEST(CudaElementwise, Clip) {
  REQUIRE_GPU();
  KernelCase attributes = unary("Clip", f32({500}), {{{"min", -1.0}, {"max", 0.5}}});
  attributes.opset = 6;
  expect_cuda_matches_reference(attributes);
  expect_cuda_matches_reference({.op = "Clip",
                                 .inputs = {f32({500}), scalar_f32(-0.5f), scalar_f32(2.0f)},
                                 .outputs = {{DType::Float32, {500}}}});
  expect_cuda_matches_reference(
      {.op = "Clip", .inputs = {f32({500}), Tensor(), scalar_f32(1.0f)}, .outputs = {{DType::Float32, {500}}}});
  Tensor lo = i64({}, -10, -10), hi = i64({}, 20, 20);
  expect_cuda_matches_reference({.op = "Clip", .inputs = {i64({300}), lo, hi}, .outputs = {{DType::Int64, {300}}}});
}

KernelCase binary(const std::string& op, Tensor a, Tensor b, DType out_dtype = DType::Undefined) {
  const std::vector<int64_t> out = *reference::broadcast_sizes(a.sizes(), b.sizes());
  const DType dtype = out_dtype == DType::Undefined ? a.dtype() : out_dtype;
  return {.op = op, .inputs = {std::move(a), std::move(b)}, .outputs = {{dtype, out}}};
}

TEST(CudaElementwise, BinaryOpsBroadcast) {
  REQUIRE_GPU();
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    expect_cuda_matches_reference(binary(op, f32({4, 3, 50}), f32({4, 3, 50}, -3, 3, 9)));    // flat
    expect_cuda_matches_reference(binary(op, f32({2, 3, 4, 5}), f32({3, 1, 5}, 0.5, 2, 9)));  // strided
    expect_cuda_matches_reference(binary(op, f64({6, 1}), f64({1, 7}, 0.5, 2, 9)));           // outer product
    expect_cuda_matches_reference(binary(op, f32({1000}), f32({}, 0.5, 2, 9)));               // scalar
    expect_cuda_matches_reference(binary(op, i64({5, 8}), i64({8}, 1, 9, 9)));                // no zero divisors
    expect_cuda_matches_reference(binary(op, i32({3, 1, 2}), i32({4, 1}, 1, 9, 9)));
  }
  expect_cuda_matches_reference(binary("Pow", f32({4, 5}, 0.1, 3), f32({5}, -2, 2)), 4e-6);
  expect_cuda_matches_reference(binary("Pow", f64({4, 5}, 0.1, 3), f64({5}, -2, 2)), 4e-6);
  expect_cuda_matches_reference(binary("Pow", f32({4, 5}, -3, 3), i64({4, 1}, 0, 4)), 4e-6);
  expect_cuda_matches_reference(binary("PRelu", f32({2, 3, 4}), f32({3, 1}, 0, 1)));
  expect_cuda_matches_reference(binary("PRelu", i64({2, 3, 4}), i64({4}, 0, 3)));
  // Large enough for several grid-stride iterations per thread.
  expect_cuda_matches_reference(binary("Add", f32({64, 3, 256, 33}), f32({3, 1, 33}, -1, 1, 9)));
}

TEST(CudaElementwise, VariadicOps) {
  REQUIRE_GPU();
  for (const char* op : {"Sum", "Mean", "Max", "Min"}) {
    expect_cuda_matches_reference({.op = op, .inputs = {f32({2, 3, 4})}, .outputs = {{DType::Float32, {2, 3, 4}}}});
    expect_cuda_matches_reference({.op = op,
                                   .inputs = {f32({3, 1}, -3, 3, 1), f32({2, 1, 4}, -3, 3, 2), f32({4}, -3, 3, 3)},
                                   .outputs = {{DType::Float32, {2, 3, 4}}}});
    expect_cuda_matches_reference(
        {.op = op, .inputs = {f64({5}), f64({5}, -1, 1, 7)}, .outputs = {{DType::Float64, {5}}}});
  }
  Tensor with_nan = f32({4});
  with_nan.data<float>()[2] = std::nanf("");
  expect_cuda_matches_reference({.op = "Max", .inputs = {f32({4}), with_nan}, .outputs = {{DType::Float32, {4}}}});
  expect_cuda_matches_reference(
      {.op = "Min", .inputs = {i64({2, 3}), i64({3}, -5, 5, 8), i64({1})}, .outputs = {{DType::Int64, {2, 3}}}});
}

TEST(CudaElementwise, CompareLogicWhere) {
  REQUIRE_GPU();
  for (const char* op : {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"}) {
    expect_cuda_matches_reference(binary(op, i64({3, 40}, -3, 3), i64({40}, -3, 3, 8), DType::Bool));
    expect_cuda_matches_reference(binary(op, f32({3, 4}), f32({3, 1}), DType::Bool));
    expect_cuda_matches_reference(binary(op, f64({7}), f64({}), DType::Bool));
  }
  expect_cuda_matches_reference(binary("Equal", bools({5, 6}), bools({6}, 9), DType::Bool));
  for (const char* op : {"And", "Or", "Xor"}) expect_cuda_matches_reference(binary(op, bools({4, 9}), bools({9}, 7)));
  expect_cuda_matches_reference(unary("Not", bools({99})));
  expect_cuda_matches_reference({.op = "Where",
                                 .inputs = {bools({3, 1, 5}), f32({4, 5}), f32({3, 4, 1}, -1, 1, 8)},
                                 .outputs = {{DType::Float32, {3, 4, 5}}}});
  expect_cuda_matches_reference(
      {.op = "Where", .inputs = {bools({6}), i64({6}), i64({})}, .outputs = {{DType::Int64, {6}}}});
  expect_cuda_matches_reference(
      {.op = "Where", .inputs = {bools({6}), bools({6}, 3), bools({1}, 4)}, .outputs = {{DType::Bool, {6}}}});
}

TEST(CudaElementwise, CastBetweenCheapTypes) {
  REQUIRE_GPU();
  Tensor x = f64({64}, -1e10, 1e10);
  x.data<double>()[0] = std::nan("");
  x.data<double>()[1] = 0;
  const std::pair<DType, int64_t> targets[] = {
      {DType::Float32, 1}, {DType::Float64, 11}, {DType::Int32, 6}, {DType::Int64, 7}, {DType::Bool, 9}};
  const std::vector<Tensor> sources = {x, f32({64}, -100, 100), i32({64}), i64({64}), bools({64})};
  for (const Tensor& source : sources) {
    for (const auto& [to, code] : targets) {
      expect_cuda_matches_reference(
          {.op = "Cast", .attributes = {{{"to", code}}}, .inputs = {source}, .outputs = {{to, source.sizes()}}});
    }
  }
  expect_cuda_matches_reference({.op = "CastLike", .inputs = {f32({9}), i64({1})}, .outputs = {{DType::Int64, {9}}}});
}

// The casts of --precision's autocast pass: float32 to float16/bfloat16 (round to nearest even) and back,
// bit for bit the reference's, over values that round up, down, overflow fp16 and underflow to subnormals.
TEST(CudaElementwise, CastBetweenFloat32AndHalfTypes) {
  REQUIRE_GPU();
  Tensor x = f32({256}, -70000, 70000);
  for (int i = 0; i < 64; ++i) x.data<float>()[i] = std::ldexp(1.0f + i / 64.0f, -20 + i / 4);  // tiny
  for (const auto& [half, code] : {std::pair{DType::Float16, int64_t{10}}, std::pair{DType::BFloat16, int64_t{16}}}) {
    expect_cuda_matches_reference(
        {.op = "Cast", .attributes = {{{"to", code}}}, .inputs = {x}, .outputs = {{half, x.sizes()}}});
    Tensor h(half, x.sizes());
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float v = x.data<float>()[i];
      h.data<uint16_t>()[i] =
          half == DType::Float16 ? reference::double_to_half_bits(v) : reference::float_to_bfloat16_bits(v);
    }
    expect_cuda_matches_reference(
        {.op = "Cast", .attributes = {{{"to", int64_t{1}}}}, .inputs = {h}, .outputs = {{DType::Float32, h.sizes()}}});
  }
}

TEST(CudaElementwise, ActivationGrad) {
  REQUIRE_GPU();
  for (const char* name : {"Relu", "LeakyRelu", "Elu", "Selu", "Sigmoid", "Tanh", "Gelu", "Erf", "Softplus",
                           "HardSigmoid", "HardSwish", "Abs", "Exp", "Sin", "Cos", "Ceil", "Floor"}) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      Tensor dy = dtype == DType::Float32 ? f32({3, 300}, -2, 2, 11) : f64({3, 300}, -2, 2, 11);
      Tensor x = dtype == DType::Float32 ? f32({3, 300}, -5, 5, 12) : f64({3, 300}, -5, 5, 12);
      expect_cuda_matches_reference({.op = "ActivationGrad",
                                     .attributes = {{{"activation", std::string(name)}}},
                                     .inputs = {dy, x},
                                     .outputs = {{dtype, {3, 300}}},
                                     .domain = "ai.onnxtrain"},
                                    4e-6);
    }
  }
  for (const char* name : {"Sqrt", "Log", "Reciprocal"}) {
    expect_cuda_matches_reference({.op = "ActivationGrad",
                                   .attributes = {{{"activation", std::string(name)}}},
                                   .inputs = {f32({257}), f32({257}, 0.1, 9)},
                                   .outputs = {{DType::Float32, {257}}},
                                   .domain = "ai.onnxtrain"},
                                  4e-6);
  }
  expect_cuda_matches_reference(
      {.op = "ActivationGrad",
       .attributes = {{{"activation", std::string("Gelu")}, {"approximate", std::string("tanh")}}},
       .inputs = {f32({257}), f32({257})},
       .outputs = {{DType::Float32, {257}}},
       .domain = "ai.onnxtrain"},
      4e-6);
}

TEST(CudaElementwise, DropoutMaskEqualsReference) {
  REQUIRE_GPU();
  const std::vector<int64_t> sizes = {8, 1000};
  for (uint64_t run_index : {uint64_t{0}, uint64_t{3}}) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      Tensor x = dtype == DType::Float32 ? f32(sizes) : f64(sizes);
      expect_cuda_matches_reference({.op = "Dropout",
                                     .opset = 13,
                                     .attributes = {{{"seed", int64_t{42}}}},
                                     .inputs = {x, scalar_f32(0.25f), scalar_bool(true)},
                                     .outputs = {{dtype, sizes}, {DType::Bool, sizes}}},
                                    0, run_index);
    }
  }
  // training_mode false, no training_mode input, and the attribute form before opset 12.
  expect_cuda_matches_reference({.op = "Dropout",
                                 .opset = 13,
                                 .inputs = {f32(sizes), scalar_f32(0.5f), scalar_bool(false)},
                                 .outputs = {{DType::Float32, sizes}, {DType::Bool, sizes}}});
  expect_cuda_matches_reference({.op = "Dropout",
                                 .opset = 13,
                                 .inputs = {f32(sizes)},
                                 .outputs = {{DType::Float32, sizes}, {DType::Bool, sizes}}});
  expect_cuda_matches_reference({.op = "Dropout",
                                 .opset = 7,
                                 .attributes = {{{"ratio", 0.2}}},
                                 .inputs = {f32(sizes)},
                                 .outputs = {{DType::Float32, sizes}, {DType::Float32, sizes}}});
  // An odd count (the last thread's pair is half used) and a float64 ratio.
  for (uint64_t run_index : {uint64_t{1}, uint64_t{2}}) {
    expect_cuda_matches_reference({.op = "Dropout",
                                   .opset = 13,
                                   .attributes = {{{"seed", int64_t{-3}}}},
                                   .inputs = {f32({3, 333}), scalar_f64(0.7), scalar_bool(true)},
                                   .outputs = {{DType::Float32, {3, 333}}, {DType::Bool, {3, 333}}}},
                                  0, run_index);
  }
  // Without a mask output, Y still uses the reference mask.
  expect_cuda_matches_reference({.op = "Dropout",
                                 .opset = 13,
                                 .inputs = {f32(sizes), scalar_f32(0.6f), scalar_bool(true)},
                                 .outputs = {{DType::Float32, sizes}}},
                                0, 7);
}

TEST(CudaElementwise, DropoutGrad) {
  REQUIRE_GPU();
  const std::vector<int64_t> sizes = {4, 333};
  const auto grad = [&](std::vector<Tensor> inputs, DType dtype) {
    return KernelCase{
        .op = "DropoutGrad", .inputs = std::move(inputs), .outputs = {{dtype, sizes}}, .domain = "ai.onnxtrain"};
  };
  expect_cuda_matches_reference(grad({f32(sizes), bools(sizes)}, DType::Float32));
  expect_cuda_matches_reference(grad({f64(sizes), bools(sizes), scalar_f32(0.3f)}, DType::Float64));
  expect_cuda_matches_reference(grad({f32(sizes), bools(sizes), scalar_f32(0.3f), scalar_bool(false)}, DType::Float32));
  Tensor float_mask = f32(sizes, 0, 1.5);
  for (float& v : float_mask.data<float>()) v = v > 0.75f ? 1.0f : 0.0f;
  expect_cuda_matches_reference(grad({f32(sizes), float_mask, scalar_f32(0.5f), scalar_bool(true)}, DType::Float32));
}

TEST(CudaElementwise, UnsupportedIsAPrepareError) {
  // Prepare-time checks need no GPU: an int8 Add has no CUDA entry, a float64 to float16 cast is refused
  // (the half types cast to and from float32 only).
  const KernelEntry* add = KernelRegistry::builtin().find("", "Add", DeviceKind::Cuda, DType::Int8, "cuda");
  EXPECT_EQ(add, nullptr);
  if (!ONNXTRAIN_WITH_CUDA) GTEST_SKIP() << "CUDA compiled out: no CUDA kernels registered";
  const KernelEntry* cast = KernelRegistry::builtin().find("", "Cast", DeviceKind::Cuda, DType::Int32, "cuda");
  ASSERT_NE(cast, nullptr);
  KernelSpec spec{.op_type = "Cast",
                  .opset = 13,
                  .attributes = {{{"to", int64_t{10}}}},
                  .inputs = {{DType::Int32, {3}}},
                  .outputs = {{DType::Float16, {3}}},
                  .node_name = "c"};
  try {
    cast->prepare(spec);
    ADD_FAILURE() << "Cast from int32 to float16 prepared";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("to and from float32"), std::string::npos) << e.what();
  }
}

}  // namespace
