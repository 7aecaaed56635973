// The optimizer update kernels: on a GPU the CUDA launchers of kernels/cuda/optimizer_update.h, given the
// functor optim::update_rule makes and the state arrays dispatch_update passes (what the trainer's device
// step launches), equal the executor's host step bit for bit over several steps with changing learning
// rates, for every optimizer and option (the device code is the same functors, compiled without FMA
// contraction). On the CPU: AMSGrad's running maximum. That update_rule's functors in a host loop equal
// the host step is tests/device_optimizer_test.cc's. The fp16 unscale likewise: its functor's finite
// check on the CPU, and on a GPU the kernel against LossScaler::unscale.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "executor/device_optimizer.h"
#include "executor/loss_scaler.h"
#include "executor/optimizer.h"
#include "kernels/cuda/cuda_runtime.h"
#include "kernels/loss_scale_math.h"
#include "kernels/optimizer_math.h"
#include "tests/optimizer_cases.h"
#if ONNXTRAIN_WITH_CUDA
#include "kernels/cuda/optimizer_update.h"
#endif

using namespace onnxtrain;
namespace om = onnxtrain::optimizer_math;

namespace {

TEST(OptimizerMath, AmsgradKeepsTheRunningMaximum) {
  // hmax must never decrease, even when h does (a gradient that shrinks to zero).
  const om::AdamUpdate f = om::adam_update(false, true, 0.01, 0.0, 0.9, 0.5, 1e-8, 0.0, 0);
  float w = 1.0f, m = 0.0f, h = 0.0f, hmax = 0.0f;
  f(w, 3.0f, m, h, hmax);
  const float peak = hmax;
  EXPECT_GT(peak, 0.0f);
  f(w, 0.0f, m, h, hmax);
  EXPECT_LT(h, peak);
  EXPECT_EQ(hmax, peak);
}

TEST(OptimizerMath, UnscaleFindsEveryNonFiniteValue) {
  const om::UnscaleGradient f{.inverse = 1.0f / 1024};
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (float g : {0.0f, -0.0f, 1.0f, std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()}) {
    float v = g;
    EXPECT_TRUE(f(v)) << g;
    EXPECT_EQ(v, g / 1024) << "the float32 reciprocal times g";
  }
  for (float g : {inf, -inf, nan}) {
    float v = g;
    EXPECT_FALSE(f(v)) << g;
  }
}

#if ONNXTRAIN_WITH_CUDA

constexpr int64_t kNumel = 1037;  // not a multiple of any vector width or block size: tails are covered
constexpr int kSteps = 6;

using namespace optimizer_cases;

// The state arrays in Optimizer::state_names() order, as the executor creates them.
std::vector<std::vector<float>> initial_states(const Optimizer& opt) {
  std::vector<std::vector<float>> states;
  for (const std::string& name : opt.state_names())
    states.emplace_back(kNumel, optim::initial_state_value(opt.config(), name));
  return states;
}

// The executor's own state for one parameter, stepped alongside.
struct ExecutorRun {
  Optimizer opt;
  ParamState state;
  std::vector<float> w;
  explicit ExecutorRun(const OptimizerConfig& c, std::vector<float> w0) : opt(c), w(std::move(w0)) {}
  void step(const std::vector<float>& g, double lr) { opt.update(w, g, state, lr); }
  void expect_equal(const std::vector<float>& w2, const std::vector<std::vector<float>>& s2, const std::string& at) {
    expect_same_bits(w, w2, at + " weights");
    const std::vector<std::string> names = opt.state_names();
    ASSERT_EQ(names.size(), s2.size()) << at;
    for (size_t k = 0; k < names.size(); ++k) expect_same_bits(state.tensor(names[k]), s2[k], at + " " + names[k]);
  }
};

// --- on a GPU: the CUDA launchers against the executor's host step ---

TEST(CudaOptimizerUpdate, LaunchersEqualTheHostStepBitForBit) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  cuda::DeviceStream stream(0);
  const Stream ks = stream.kernel_stream(0);
  const size_t bytes = kNumel * sizeof(float);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<float> w0 = uniform(kNumel, -1.0f, 1.0f, 11);
    ExecutorRun executor(c.config, w0);
    std::vector<std::vector<float>> states = initial_states(executor.opt);
    cuda::DeviceBuffer dw(stream, bytes), dg(stream, bytes);
    std::vector<cuda::DeviceBuffer> ds;
    for (const std::vector<float>& s : states) {
      ds.emplace_back(stream, bytes);
      cuda::copy_to_device(ds.back().data(), s.data(), bytes, stream);
    }
    cuda::copy_to_device(dw.data(), w0.data(), bytes, stream);
    auto dev = [&](size_t k) { return static_cast<float*>(ds[k].data()); };
    float* w_dev = static_cast<float*>(dw.data());
    const float* g_dev = static_cast<const float*>(dg.data());
    std::vector<float> w(w0.size());
    for (int k = 0; k < kSteps; ++k) {
      const std::vector<float> g = uniform(kNumel, -2.0f, 2.0f, 200 + static_cast<uint32_t>(k));
      executor.step(g, lr_at(k));
      cuda::copy_to_device(dg.data(), g.data(), bytes, stream);
      std::vector<float*> arrays;
      for (size_t j = 0; j < ds.size(); ++j) arrays.push_back(dev(j));
      // The functor and state arrays the trainer's device step launches (executor/device_optimizer.h).
      dispatch_update(optim::update_rule(c.config, k, lr_at(k)), arrays, [&](const auto& f, auto*... state) {
        cuda::optimizer_update(f, w_dev, g_dev, state..., kNumel, ks);
      });
      cuda::copy_to_host(w.data(), dw.data(), bytes, stream);
      for (size_t s = 0; s < states.size(); ++s) cuda::copy_to_host(states[s].data(), ds[s].data(), bytes, stream);
      stream.synchronize();
      ASSERT_NO_FATAL_FAILURE(executor.expect_equal(w, states, c.name + " step " + std::to_string(k)));
    }
  }
}

// fp16 loss scaling: the device unscale equals LossScaler::unscale bit for bit and raises its flag for
// an inf or NaN anywhere (the last element: the grid-stride tail).
TEST(CudaOptimizerUpdate, UnscaleEqualsTheHostAndFlagsNonFiniteValues) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  cuda::DeviceStream stream(0);
  const size_t bytes = kNumel * sizeof(float);
  const double scale = 65536.0;
  for (const float poison : {0.5f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> host = uniform(kNumel, -3e4f, 3e4f, 5);
    host.back() = poison;
    cuda::DeviceBuffer dg(stream, bytes), flag(stream, sizeof(int));
    int nonfinite = 0;
    cuda::copy_to_device(flag.data(), &nonfinite, sizeof(int), stream);
    cuda::copy_to_device(dg.data(), host.data(), bytes, stream);
    const om::UnscaleGradient f{.inverse = static_cast<float>(1.0 / scale)};
    cuda::unscale_gradient(f, static_cast<float*>(dg.data()), kNumel, static_cast<int*>(flag.data()),
                           stream.kernel_stream(0));
    std::vector<float> device(kNumel);
    cuda::copy_to_host(device.data(), dg.data(), bytes, stream);
    cuda::copy_to_host(&nonfinite, flag.data(), sizeof(int), stream);
    stream.synchronize();
    const bool finite = LossScaler::unscale(host, scale);
    EXPECT_EQ(nonfinite == 0, finite) << poison;
    expect_same_bits(host, device, "unscaled gradient");
  }
}

#else  // CUDA compiled out

TEST(CudaOptimizerUpdate, LaunchersEqualTheHostStepBitForBit) {
  GTEST_SKIP() << "CUDA compiled out: no optimizer kernels built";
}

#endif

}  // namespace
