#include "kernels/backend_info.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace onnxtrain;

TEST(BackendInfo, OneDnnVersionAndIsa) {
  const BackendInfo info = query_backend_info();
  // "MAJOR.MINOR.PATCH"
  const std::string& v = info.onednn_version;
  EXPECT_EQ(std::count(v.begin(), v.end(), '.'), 2) << v;
  EXPECT_TRUE(!v.empty() && std::all_of(v.begin(), v.end(), [](char c) { return c == '.' || (c >= '0' && c <= '9'); }))
      << v;
  EXPECT_FALSE(info.onednn_cpu_runtime.empty());
  EXPECT_FALSE(info.cpu_isa.empty());
  EXPECT_GT(info.cpu_threads, 0u);
  std::cout << format_backend_info(info);
}

TEST(BackendInfo, CudaCompiledMatchesBuild) {
  const BackendInfo info = query_backend_info();
  EXPECT_EQ(info.cuda.compiled, ONNXTRAIN_WITH_CUDA != 0);
  if (!info.cuda.compiled) {
    EXPECT_TRUE(info.cuda.devices.empty());
    EXPECT_NE(info.cuda.unavailable_reason.find("not compiled in"), std::string::npos) << info.cuda.unavailable_reason;
    return;
  }
  EXPECT_FALSE(info.cuda.toolkit_version.empty());
  EXPECT_GT(info.cuda.runtime_version, 0);
  EXPECT_FALSE(info.cuda.cublas_version.empty());
}

// Without a GPU the query answers with an empty list and a reason, and never aborts.
TEST(BackendInfo, NoDeviceGivesEmptyListAndReason) {
  const BackendInfo info = query_backend_info();
  if (!info.cuda.devices.empty()) GTEST_SKIP() << "a GPU is visible; the no-device path is not exercised";
  EXPECT_FALSE(info.cuda.unavailable_reason.empty());
  const std::string text = format_backend_info(info);
  EXPECT_NE(text.find(info.cuda.unavailable_reason), std::string::npos) << text;
}

TEST(BackendInfo, GpuDevicesAreDescribed) {
  const BackendInfo info = query_backend_info();
  if (info.cuda.devices.empty()) GTEST_SKIP() << "no GPU visible: " << info.cuda.unavailable_reason;
  EXPECT_TRUE(info.cuda.unavailable_reason.empty());
  EXPECT_GT(info.cuda.driver_version, 0);
  for (const cuda::CudaDeviceProperties& d : info.cuda.devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.compute_capability_major, 7) << d.name;  // CUDA 13 supports sm_75 and newer only
    EXPECT_GT(d.total_memory_bytes, 1ull << 30) << d.name;
    EXPECT_GT(d.multiprocessor_count, 0) << d.name;
    EXPECT_EQ(cuda::run_smoke_kernel(d.index), "") << d.name;
  }
}

TEST(BackendInfo, FormatCudaVersion) {
  EXPECT_EQ(cuda::format_cuda_version(13000), "13.0");
  EXPECT_EQ(cuda::format_cuda_version(12080), "12.8");
}
