// The host-side logic of the optimizer step on a CUDA device (executor/device_optimizer.h), checked on the
// CPU: the functor optim::update_rule gives for a config and a step is the one the host loops run, the
// state arrays dispatch_update passes (in state_names() order, starting at initial_state_value) make a
// loop over them equal Optimizer::update bit for bit, the Optimizer's state-sync hook runs before a
// checkpoint reads the state (and only then), and the CUDA-only entry points fail clearly without a GPU.
#include "executor/device_optimizer.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "executor/device_initializers.h"
#include "executor/inference_session.h"
#include "executor/optimizer.h"
#include "frontend/importer.h"
#include "graph/error.h"
#include "kernels/cuda/cuda_runtime.h"
#include "tests/optimizer_cases.h"

namespace onnxtrain {
namespace {

namespace om = optimizer_math;

constexpr int64_t kNumel = 333;
constexpr int kSteps = 5;

using namespace optimizer_cases;

template <typename F>
bool same_bytes(const F& a, const F& b) {
  return std::memcmp(&a, &b, sizeof(F)) == 0;
}

// The functor each optimizer file built inline before update_rule existed, spelled out from
// kernels/optimizer_math.h: update_rule must give exactly this (type and every scalar).
TEST(DeviceOptimizer, UpdateRuleIsTheFunctorOfTheHostLoop) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const OptimizerConfig& k = c.config;
    for (int step = 0; step < 3; ++step) {
      const double lr = lr_at(step);
      const optim::UpdateRule rule = optim::update_rule(k, step, lr);
      switch (k.kind) {
        case OptimizerKind::sgd:
          if (k.momentum == 0) {
            ASSERT_TRUE(std::holds_alternative<om::SgdUpdate>(rule));
            EXPECT_TRUE(same_bytes(std::get<om::SgdUpdate>(rule), om::sgd_plain_update(lr, k.weight_decay)));
          } else if (k.nesterov) {
            ASSERT_TRUE(std::holds_alternative<om::SgdNesterovUpdate>(rule));
            EXPECT_TRUE(same_bytes(std::get<om::SgdNesterovUpdate>(rule),
                                   om::sgd_nesterov_update(lr, k.weight_decay, k.momentum, k.dampening, step)));
          } else {
            ASSERT_TRUE(std::holds_alternative<om::SgdMomentumUpdate>(rule));
            const om::SgdMomentumUpdate f = std::get<om::SgdMomentumUpdate>(rule);
            EXPECT_TRUE(same_bytes(f, om::sgd_momentum_update(lr, k.weight_decay, k.momentum, k.dampening, step)));
            // torch's first update takes the gradient whole; later ones dampened.
            EXPECT_EQ(f.grad_coef, step == 0 ? 1.0f : static_cast<float>(1.0 - k.dampening));
          }
          break;
        case OptimizerKind::adam:
        case OptimizerKind::adamw:
          ASSERT_TRUE(std::holds_alternative<om::AdamUpdate>(rule));
          EXPECT_TRUE(
              same_bytes(std::get<om::AdamUpdate>(rule),
                         om::adam_update(k.kind == OptimizerKind::adamw, k.convention == AdamConvention::torch, lr,
                                         k.weight_decay, k.beta1, k.beta2, k.eps, k.post_update_decay, step)));
          break;
        case OptimizerKind::adagrad:
          ASSERT_TRUE(std::holds_alternative<om::AdagradUpdate>(rule));
          EXPECT_TRUE(same_bytes(std::get<om::AdagradUpdate>(rule),
                                 om::adagrad_update(lr, k.weight_decay, k.lr_decay, k.eps, step)));
          break;
      }
    }
  }
}

TEST(DeviceOptimizer, StatesStartWhereTheHostOptimizerStartsThem) {
  const OptimizerConfig adagrad{.kind = OptimizerKind::adagrad, .initial_accumulator_value = 0.25};
  EXPECT_EQ(optim::initial_state_value(adagrad, "sum"), 0.25f);
  const OptimizerConfig adam{.kind = OptimizerKind::adam, .initial_accumulator_value = 0.25};
  EXPECT_EQ(optim::initial_state_value(adam, "exp_avg"), 0.0f);
  EXPECT_EQ(optim::initial_state_value(adam, "exp_avg_sq"), 0.0f);
  // The host optimizer's first Adagrad update makes its sum from the same value.
  Optimizer opt(adagrad);
  ParamState s;
  std::vector<float> w{1.0f}, g{0.0f};
  opt.update(w, g, s, 0.1);
  EXPECT_EQ(s.tensor("sum")[0], 0.25f);  // a zero gradient adds nothing to the initial accumulator
}

// What the device step does per parameter, with a host loop in place of the CUDA launcher: states made
// from initial_state_value in state_names() order, the functor of update_rule(config, step, lr),
// dispatched by dispatch_update. It must equal Optimizer::update bit for bit, step after step.
TEST(DeviceOptimizer, DispatchedRuleEqualsTheHostStepBitForBit) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const Optimizer opt(c.config);
    const std::vector<float> w0 = uniform(kNumel, -1.0f, 1.0f, 5);
    std::vector<float> host_w = w0, dev_w = w0;
    ParamState host_state;
    std::vector<std::vector<float>> dev_states;
    for (const std::string& name : opt.state_names())
      dev_states.emplace_back(kNumel, optim::initial_state_value(c.config, name));
    int64_t dev_step = 0;
    for (int k = 0; k < kSteps; ++k) {
      const std::vector<float> g = uniform(kNumel, -2.0f, 2.0f, 50 + static_cast<uint32_t>(k));
      opt.update(host_w, g, host_state, lr_at(k));
      std::vector<float*> arrays;
      for (std::vector<float>& s : dev_states) arrays.push_back(s.data());
      dispatch_update(optim::update_rule(c.config, dev_step, lr_at(k)), arrays, [&](const auto& f, auto*... s) {
        for (int64_t i = 0; i < kNumel; ++i) f(dev_w[i], g[i], s[i]...);
      });
      ++dev_step;
      ASSERT_NO_FATAL_FAILURE(expect_same_bits(host_w, dev_w, "weights at step " + std::to_string(k)));
      const std::vector<std::string> names = opt.state_names();
      for (size_t n = 0; n < names.size(); ++n)
        ASSERT_NO_FATAL_FAILURE(expect_same_bits(host_state.tensor(names[n]), dev_states[n], names[n]));
    }
    EXPECT_EQ(host_state.step, dev_step);
    EXPECT_NE(std::bit_cast<uint32_t>(dev_w[0]), std::bit_cast<uint32_t>(w0[0]));  // the weights moved
  }
}

TEST(DeviceOptimizer, DispatchRefusesTooFewStateArrays) {
  const OptimizerConfig adam{.kind = OptimizerKind::adam};
  std::vector<float*> one{nullptr};
  try {
    dispatch_update(optim::update_rule(adam, 0, 0.1), one, [](const auto&, auto*...) {});
    FAIL() << "an Adam update was dispatched with one state array";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs 2 state arrays, got 1"), std::string::npos) << e.what();
  }
}

// The hook a device optimizer sets: state_tensors() and states() call it first (a checkpoint sees what
// it writes), state() (the device step's own bookkeeping) does not; a copy of the Optimizer drops it.
TEST(DeviceOptimizer, StateSyncRunsBeforeTheStateIsRead) {
  Optimizer opt({.kind = OptimizerKind::sgd, .momentum = 0.9});
  int calls = 0;
  opt.set_state_sync([&](std::map<std::string, ParamState>& states) {
    ++calls;
    ParamState& s = states["w"];
    s.step = 7;
    s.tensors["momentum_buffer"] = Tensor(DType::Float32, {2});
    s.tensors["momentum_buffer"].data<float>()[1] = 3.5f;
  });
  opt.state("w");
  EXPECT_EQ(calls, 0);
  const std::map<std::string, Tensor> saved = opt.state_tensors();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(saved.at("w/step").to_int64()[0], 7);
  EXPECT_EQ(saved.at("w/momentum_buffer").data<float>()[1], 3.5f);
  EXPECT_EQ(opt.states().at("w").step, 7);
  EXPECT_EQ(calls, 2);

  Optimizer copy = opt;
  copy.state_tensors();
  EXPECT_EQ(calls, 2);  // the copy has no hook
  Optimizer moved = std::move(opt);
  moved.state_tensors();
  EXPECT_EQ(calls, 3);  // a move keeps it

  EXPECT_EQ(copy.global_step(), 0);
  copy.count_step();
  EXPECT_EQ(copy.global_step(), 1);
  EXPECT_DOUBLE_EQ(copy.current_lr(), copy.schedule().lr_at(1));
}

// Without a GPU the CUDA-only pieces say why they cannot run; the CPU session is unchanged.
TEST(DeviceOptimizer, DevicePiecesNeedAVisibleDevice) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a CUDA device is visible: cuda_device_test covers the device path";
  EXPECT_THROW(DeviceInitializerStore(0), Error);
  ImportedModel model = import_model(std::string(ONNXTRAIN_SOURCE_DIR) + "/models/mlp_opset17.onnx");
  InferenceSession cpu(model.graph);
  EXPECT_EQ(cpu.device_initializers(), nullptr);
  cpu.initializers_changed();  // a no-op on the CPU
  std::map<std::string, DeviceTensor> kept;
  try {
    cpu.run({}, {"anything"}, kept);
    FAIL() << "a CPU session kept outputs on a device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("need a session on a CUDA device"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace onnxtrain
