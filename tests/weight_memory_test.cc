// executor/pipeline/weight_memory.h on the host: the gpipe accumulation and scaling functors
// (kernels/weight_math.h, the CUDA kernels' code too) and the host copies. The device side is checked
// against this host side in cuda_pipeline_test (WeightPolicyOnTheDeviceEqualsTheHostPolicy).
#include "executor/pipeline/weight_memory.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace onnxtrain {
namespace {

TEST(WeightMemory, AccumulatesWeightedGradientsAndScales) {
  const WeightMemory memory;
  ASSERT_FALSE(memory.on_device());
  WeightArray acc = memory.make(3);
  ASSERT_EQ(acc.size, 3u);
  const float g1[3] = {1.0f, -0.0f, 3.0f}, g2[3] = {0.5f, 0.25f, -1.0f};
  memory.accumulate(acc.data(), g1, 3, 1.0f, true);
  EXPECT_EQ(std::memcmp(acc.data(), g1, sizeof g1), 0) << "the first add with weight 1 copies (-0 stays -0)";
  memory.accumulate(acc.data(), g2, 3, 0.5f, false);
  EXPECT_EQ(acc.data()[0], 1.0f + 0.5f * 0.5f);
  EXPECT_EQ(acc.data()[1], -0.0f + 0.5f * 0.25f);
  EXPECT_EQ(acc.data()[2], 3.0f + 0.5f * -1.0f);
  memory.accumulate(acc.data(), g2, 3, 2.0f, true);
  EXPECT_EQ(acc.data()[2], -2.0f) << "first: the sum restarts";
  memory.scale(acc.data(), 3, 0.25f);
  EXPECT_EQ(acc.data()[0], 0.25f);
  EXPECT_EQ(acc.data()[2], -0.5f);
  const float nan[1] = {std::numeric_limits<float>::quiet_NaN()};
  memory.accumulate(acc.data(), nan, 1, 1.0f, false);
  EXPECT_TRUE(std::isnan(acc.data()[0])) << "an inf/NaN gradient is not hidden";
}

TEST(WeightMemory, HostCopiesAndTheWorkingWeightsAreTheTensorsBuffer) {
  WeightMemory memory;
  Tensor w(DType::Float32, {4});
  float* working = memory.working("w", w);
  EXPECT_EQ(working, w.data<float>().data()) << "the graphs read this buffer: it is written in place";
  const std::vector<float> values = {1, 2, 3, 4};
  memory.upload(working, values);
  WeightArray copy = memory.make(4);
  memory.copy(copy.data(), working, 4);
  std::vector<float> back(4);
  memory.download(back, copy.data());
  EXPECT_EQ(back, values);
  Optimizer sgd({}, {.base_lr = 0.5});
  const float grad[4] = {2, 2, 2, 2};
  memory.step(sgd, std::vector<DeviceParamSlot>{{.name = "w", .value = copy.data(), .grad = grad, .numel = 4}});
  memory.download(back, copy.data());
  EXPECT_EQ(back, (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(sgd.global_step(), 1);
}

}  // namespace
}  // namespace onnxtrain
