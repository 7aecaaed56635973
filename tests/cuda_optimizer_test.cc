// The optimizer update functors of kernels/optimizer_math.h: applied in a plain loop they equal the
// executor's optimizer step (executor/optim/*.cc) bit for bit over several steps with changing learning
// rates, for every optimizer and option; on a GPU the CUDA launchers of kernels/cuda/optimizer_update.h
// equal the host step bit for bit too (the device code is the same functors, compiled without FMA
// contraction).
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "executor/optimizer.h"
#include "kernels/cuda/cuda_runtime.h"
#include "kernels/optimizer_math.h"
#if ONNXTRAIN_WITH_CUDA
#include "kernels/cuda/optimizer_update.h"
#endif

using namespace onnxtrain;
namespace om = onnxtrain::optimizer_math;

namespace {

constexpr int64_t kNumel = 1037;  // not a multiple of any vector width or block size: tails are covered
constexpr int kSteps = 6;

struct Case {
  std::string name;
  OptimizerConfig config;
};

std::vector<Case> cases() {
  using K = OptimizerKind;
  return {
      {"sgd", {.kind = K::sgd}},
      {"sgd_weight_decay", {.kind = K::sgd, .weight_decay = 0.01}},
      {"momentum", {.kind = K::sgd, .momentum = 0.9}},
      {"momentum_dampening_weight_decay", {.kind = K::sgd, .weight_decay = 1e-3, .momentum = 0.8, .dampening = 0.3}},
      {"nesterov_weight_decay", {.kind = K::sgd, .weight_decay = 5e-4, .momentum = 0.9, .nesterov = true}},
      {"adam", {.kind = K::adam}},
      {"adam_l2_amsgrad", {.kind = K::adam, .weight_decay = 0.01, .beta1 = 0.8, .beta2 = 0.99, .amsgrad = true}},
      {"adamw", {.kind = K::adamw, .weight_decay = 0.05}},
      {"adamw_amsgrad", {.kind = K::adamw, .weight_decay = 0.05, .eps = 1e-6, .amsgrad = true}},
      {"adam_onnx_post_decay",
       {.kind = K::adam, .weight_decay = 0.01, .convention = AdamConvention::onnx, .post_update_decay = 1e-3}},
      {"adagrad",
       {.kind = K::adagrad, .weight_decay = 0.01, .eps = 1e-10, .lr_decay = 0.01, .initial_accumulator_value = 0.1}},
  };
}

// The learning rate of step `k` (changing, as a schedule would).
double lr_at(int k) { return 0.05 / (1.0 + 0.3 * k); }

std::vector<float> uniform(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

// Calls fn with the functor of config c's update made after `count_before` updates at learning rate lr.
template <typename Fn>
void with_update(const OptimizerConfig& c, int64_t count_before, double lr, Fn&& fn) {
  switch (c.kind) {
    case OptimizerKind::sgd:
      if (c.momentum == 0) return fn(om::sgd_plain_update(lr, c.weight_decay));
      if (c.nesterov) return fn(om::sgd_nesterov_update(lr, c.weight_decay, c.momentum, c.dampening, count_before));
      return fn(om::sgd_momentum_update(lr, c.weight_decay, c.momentum, c.dampening, count_before));
    case OptimizerKind::adam:
    case OptimizerKind::adamw:
      return fn(om::adam_update(c.kind == OptimizerKind::adamw, c.convention == AdamConvention::torch, lr,
                                c.weight_decay, c.beta1, c.beta2, c.eps, c.post_update_decay, count_before));
    case OptimizerKind::adagrad:
      return fn(om::adagrad_update(lr, c.weight_decay, c.lr_decay, c.eps, count_before));
  }
  FAIL() << "unknown optimizer kind";
}

// The state arrays in Optimizer::state_names() order, as the executor creates them.
std::vector<std::vector<float>> initial_states(const Optimizer& opt) {
  const float init =
      opt.config().kind == OptimizerKind::adagrad ? static_cast<float>(opt.config().initial_accumulator_value) : 0.0f;
  return std::vector<std::vector<float>>(opt.state_names().size(), std::vector<float>(kNumel, init));
}

// Applies the functor f to every element, passing the state arrays in its order.
template <typename F>
void host_loop(const F& f, std::vector<float>& w, const std::vector<float>& g, std::vector<std::vector<float>>& s) {
  for (size_t i = 0; i < w.size(); ++i) {
    if constexpr (std::is_same_v<F, om::SgdUpdate>) {
      f(w[i], g[i]);
    } else if constexpr (std::is_same_v<F, om::AdamUpdate>) {
      if (s.size() == 3)
        f(w[i], g[i], s[0][i], s[1][i], s[2][i]);
      else
        f(w[i], g[i], s[0][i], s[1][i]);
    } else {
      f(w[i], g[i], s[0][i]);
    }
  }
}

// Bitwise equality, naming the first differing element (NaN-safe and -0 aware, unlike ==).
void expect_same_bits(std::span<const float> expected, std::span<const float> actual, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(expected[i]), std::bit_cast<uint32_t>(actual[i]))
        << what << " element " << i << ": " << expected[i] << " vs " << actual[i];
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

TEST(OptimizerMath, FunctorsEqualTheExecutorStepBitForBit) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<float> w0 = uniform(kNumel, -1.0f, 1.0f, 7);
    ExecutorRun executor(c.config, w0);
    std::vector<float> w = w0;
    std::vector<std::vector<float>> states = initial_states(executor.opt);
    for (int k = 0; k < kSteps; ++k) {
      const std::vector<float> g = uniform(kNumel, -2.0f, 2.0f, 100 + static_cast<uint32_t>(k));
      executor.step(g, lr_at(k));
      with_update(c.config, k, lr_at(k), [&](const auto& f) { host_loop(f, w, g, states); });
      ASSERT_NO_FATAL_FAILURE(executor.expect_equal(w, states, c.name + " step " + std::to_string(k)));
    }
    // The weights moved: the comparison above is not between two untouched copies.
    EXPECT_NE(std::bit_cast<uint32_t>(w[0]), std::bit_cast<uint32_t>(w0[0])) << c.name;
  }
}

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

// --- on a GPU: the CUDA launchers against the executor's host step ---

TEST(CudaOptimizerUpdate, LaunchersEqualTheHostStepBitForBit) {
#if !ONNXTRAIN_WITH_CUDA
  GTEST_SKIP() << "CUDA compiled out: no optimizer kernels built";
#else
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
      with_update(c.config, k, lr_at(k), [&](const auto& f) {
        using F = std::decay_t<decltype(f)>;
        if constexpr (std::is_same_v<F, om::SgdUpdate>) {
          cuda::optimizer_update(f, w_dev, g_dev, kNumel, ks);
        } else if constexpr (std::is_same_v<F, om::AdamUpdate>) {
          if (ds.size() == 3)
            cuda::optimizer_update(f, w_dev, g_dev, dev(0), dev(1), dev(2), kNumel, ks);
          else
            cuda::optimizer_update(f, w_dev, g_dev, dev(0), dev(1), kNumel, ks);
        } else {
          cuda::optimizer_update(f, w_dev, g_dev, dev(0), kNumel, ks);
        }
      });
      cuda::copy_to_host(w.data(), dw.data(), bytes, stream);
      for (size_t s = 0; s < states.size(); ++s) cuda::copy_to_host(states[s].data(), ds[s].data(), bytes, stream);
      stream.synchronize();
      ASSERT_NO_FATAL_FAILURE(executor.expect_equal(w, states, c.name + " step " + std::to_string(k)));
    }
  }
#endif
}

}  // namespace
