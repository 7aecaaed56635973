// The CUDA runtime layer (kernels/cuda/cuda_runtime.h, cuda_context.h). Everywhere: asking for a device
// that is not there is a clear Error saying how many are visible (with CUDA compiled out, or without a
// GPU, that is none). On a GPU: copies round-trip, the caching allocator serves repeated allocations
// from its cache, pinned copies, events order two streams, workspaces and cuBLAS handles behave.
#include "kernels/cuda/cuda_runtime.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "graph/error.h"

#if ONNXTRAIN_WITH_CUDA
#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_context.h"
#endif

namespace onnxtrain::cuda {
namespace {

std::string visible_phrase(int count) {
  return count == 1 ? "1 CUDA device is visible" : std::to_string(count) + " CUDA devices are visible";
}

// The message of the Error `fn` throws ("" when it throws none, which the caller reports).
template <class Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CudaRuntime, DeviceCountIsStableAndZeroWithoutCuda) {
  const int count = device_count();
  EXPECT_GE(count, 0);
  EXPECT_EQ(device_count(), count);
#if !ONNXTRAIN_WITH_CUDA
  EXPECT_EQ(count, 0);
#endif
}

TEST(CudaRuntime, RequireDeviceNamesTheDeviceAndHowManyAreVisible) {
  const int count = device_count();
  const std::string msg = error_message([&] { require_device(count, "stage 2"); });
  ASSERT_FALSE(msg.empty()) << "require_device(cuda:" << count << ") did not throw";
  EXPECT_NE(msg.find("stage 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuda:" + std::to_string(count) + " requested"), std::string::npos) << msg;
  EXPECT_NE(msg.find(visible_phrase(count)), std::string::npos) << msg;
  EXPECT_THROW(require_device(-1, "negative"), Error);
  for (int d = 0; d < count; ++d) EXPECT_NO_THROW(require_device(d, "visible device"));
}

TEST(CudaRuntime, ObjectsOnAMissingDeviceAreClearErrors) {
  const int missing = device_count();
  const std::string stream_msg = error_message([&] { DeviceStream stream(missing); });
  EXPECT_NE(stream_msg.find("DeviceStream"), std::string::npos) << stream_msg;
  EXPECT_NE(stream_msg.find("cuda:" + std::to_string(missing)), std::string::npos) << stream_msg;
  EXPECT_NE(stream_msg.find(visible_phrase(missing)), std::string::npos) << stream_msg;
  const std::string event_msg = error_message([&] { DeviceEvent event(missing); });
  EXPECT_NE(event_msg.find("DeviceEvent"), std::string::npos) << event_msg;
  EXPECT_THROW(allocator_stats(missing), Error);
  EXPECT_THROW(empty_cache(missing), Error);
  if (missing == 0) {
    // No device at all: pinned memory needs a CUDA context too.
    EXPECT_THROW(PinnedHostBuffer pinned(64), Error);
    EXPECT_THROW(pinned_tensor(0, DType::Float32, {4}), Error);
  }
}

#if ONNXTRAIN_WITH_CUDA
TEST(CudaContext, GuardsAndWorkspacesRejectStreamsThatAreNotOnAVisibleDevice) {
  const std::string cpu_msg = error_message([] { DeviceGuard guard{Stream()}; });
  EXPECT_NE(cpu_msg.find("needs a CUDA stream"), std::string::npos) << cpu_msg;
  const Stream missing(DeviceKind::Cuda, 0, nullptr, device_count());
  const std::string ws_msg = error_message([&] { workspace(missing, 1024); });
  EXPECT_NE(ws_msg.find("cuda:" + std::to_string(device_count())), std::string::npos) << ws_msg;
  EXPECT_THROW(cublas_handle(missing), Error);
}
#endif

// --- with a GPU ------------------------------------------------------------------------------------------

#define REQUIRE_GPU(n)                                                                                            \
  do {                                                                                                            \
    if (device_count() < (n))                                                                                     \
      GTEST_SKIP() << ((n) == 1 ? std::string("no CUDA device visible")                                           \
                                : std::to_string(n) + " CUDA devices needed, " + std::to_string(device_count()) + \
                                      " visible");                                                                \
  } while (0)

TEST(CudaRuntimeGpu, HostDeviceHostRoundTrip) {
  REQUIRE_GPU(1);
  DeviceStream stream(0);
  std::vector<float> host(1 << 20);
  std::iota(host.begin(), host.end(), 0.5f);
  const size_t bytes = host.size() * sizeof(float);
  DeviceBuffer a(stream, bytes);
  DeviceBuffer b(stream, bytes);
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(a.bytes(), bytes);
  copy_to_device(a.data(), host.data(), bytes, stream);
  copy_on_device(b.data(), a.data(), bytes, stream);
  std::vector<float> back(host.size(), -1.0f);
  copy_to_host(back.data(), b.data(), bytes, stream);
  stream.synchronize();
  EXPECT_EQ(back, host);
}

TEST(CudaRuntimeGpu, RepeatedAllocationsAreServedFromTheCache) {
  REQUIRE_GPU(1);
  DeviceStream stream(0);
  const DeviceAllocatorStats before = allocator_stats(0);
  constexpr int kSteps = 5;
  for (int step = 0; step < kSteps; ++step) {
    DeviceBuffer activations(stream, 3 << 20);
    DeviceBuffer gradients(stream, 4096);
    DeviceBuffer moved = std::move(gradients);  // a move hands the block over, it does not free it
    EXPECT_EQ(gradients.data(), nullptr);
    EXPECT_NE(moved.data(), nullptr);
  }
  const DeviceAllocatorStats after = allocator_stats(0);
  EXPECT_LE(after.device_allocations - before.device_allocations, 2u);
  EXPECT_GE(after.cache_hits - before.cache_hits, 2u * (kSteps - 1));
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_GE(after.peak_bytes_in_use, before.bytes_in_use + (3 << 20) + 4096);
  empty_cache(0);
  EXPECT_EQ(allocator_stats(0).bytes_cached, 0u);
}

TEST(CudaRuntimeGpu, PinnedBuffersCopyBothWays) {
  REQUIRE_GPU(1);
  DeviceStream stream(0);
  constexpr size_t kBytes = 1 << 22;
  PinnedHostBuffer src(kBytes);
  PinnedHostBuffer dst(kBytes);
  ASSERT_NE(src.data(), nullptr);
  auto* s = static_cast<unsigned char*>(src.data());
  for (size_t i = 0; i < kBytes; ++i) s[i] = static_cast<unsigned char>(i * 7 + 3);
  std::memset(dst.data(), 0, kBytes);
  DeviceBuffer device(stream, kBytes);
  copy_to_device(device.data(), src.data(), kBytes, stream);
  copy_to_host(dst.data(), device.data(), kBytes, stream);
  stream.synchronize();
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), kBytes), 0);

  PinnedHostBuffer moved = std::move(dst);
  EXPECT_EQ(dst.data(), nullptr);
  EXPECT_EQ(moved.bytes(), kBytes);
}

// pinned_tensor: page-locked (cudaPointerGetAttributes says host memory the device can reach), zeroed,
// uploaded and read back, and its block reused from the pool once the tensor goes.
TEST(CudaRuntimeGpu, PinnedTensorsComeFromAPool) {
  REQUIRE_GPU(1);
  DeviceStream stream(0);
  const DeviceAllocatorStats before = pinned_allocator_stats();
  const void* first_block = nullptr;
  {
    Tensor t = pinned_tensor(0, DType::Float32, {1000, 3});
    first_block = t.raw();
#if ONNXTRAIN_WITH_CUDA  // the runtime API itself; the rest compiles against the stub too
    cudaPointerAttributes attributes{};
    ASSERT_EQ(cudaPointerGetAttributes(&attributes, t.raw()), cudaSuccess);
    EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
#endif
    for (float v : t.data<float>()) ASSERT_EQ(v, 0.0f);
    for (size_t i = 0; i < 3000; ++i) t.data<float>()[i] = static_cast<float>(i) * 0.5f;
    DeviceBuffer device(stream, t.nbytes());
    copy_to_device(device.data(), t.raw(), t.nbytes(), stream);
    Tensor back(DType::Float32, {1000, 3});
    copy_to_host(back.raw(), device.data(), back.nbytes(), stream);
    stream.synchronize();
    EXPECT_EQ(std::memcmp(back.raw(), t.raw(), t.nbytes()), 0);
  }
  Tensor again = pinned_tensor(0, DType::Float32, {3000});
  EXPECT_EQ(again.raw(), first_block) << "the same size class comes back from the cache";
  EXPECT_EQ(pinned_allocator_stats().cache_hits, before.cache_hits + 1);
}

// The consumer stream waits on an event recorded after the producer's upload; without the wait the
// consumer's copy could read the buffer before the upload lands.
TEST(CudaRuntimeGpu, EventsOrderWorkAcrossStreams) {
  REQUIRE_GPU(1);
  DeviceStream producer(0);
  DeviceStream consumer(0);
  DeviceEvent uploaded(0);
  std::vector<int> host(1 << 22);
  std::iota(host.begin(), host.end(), 1);
  const size_t bytes = host.size() * sizeof(int);
  DeviceBuffer on_producer(producer, bytes);
  DeviceBuffer on_consumer(consumer, bytes);
  copy_to_device(on_producer.data(), host.data(), bytes, producer);
  uploaded.record(producer);
  uploaded.make_wait(consumer);
  copy_on_device(on_consumer.data(), on_producer.data(), bytes, consumer);
  std::vector<int> back(host.size(), 0);
  copy_to_host(back.data(), on_consumer.data(), bytes, consumer);
  consumer.synchronize();
  EXPECT_EQ(back, host);
  uploaded.synchronize();  // recorded and long since reached
  EXPECT_TRUE(uploaded.ready());
  producer.synchronize();
}

// ready() polls without waiting and is true once the stream has passed the recorded point. (Whether a
// 64 MiB pageable upload is still running right after the call returns depends on the runtime's staging,
// so that answer is printed, not asserted.)
TEST(CudaRuntimeGpu, EventReadyPollsTheRecordedPoint) {
  REQUIRE_GPU(1);
  DeviceStream stream(0);
  DeviceEvent done(0);
  const size_t bytes = size_t{64} << 20;
  std::vector<std::byte> host(bytes, std::byte{1});
  DeviceBuffer buffer(stream, bytes);
  copy_to_device(buffer.data(), host.data(), bytes, stream);  // pageable: staged, several milliseconds
  done.record(stream);
  const bool early = done.ready();
  stream.synchronize();
  EXPECT_TRUE(done.ready());
  std::printf("event ready right after queueing a 64 MiB pageable upload: %s\n", early ? "yes" : "no");
}

TEST(CudaRuntimeGpu, PeerCopiesBetweenTwoDevices) {
  REQUIRE_GPU(2);
  DeviceStream s0(0);
  DeviceStream s1(1);
  std::vector<float> host(1 << 16);
  std::iota(host.begin(), host.end(), -3.0f);
  const size_t bytes = host.size() * sizeof(float);
  DeviceBuffer on0(s0, bytes);
  DeviceBuffer on1(s1, bytes);
  copy_to_device(on0.data(), host.data(), bytes, s0);
  copy_between_devices(on1.data(), 1, on0.data(), 0, bytes, s0);
  s0.synchronize();
  std::vector<float> back(host.size(), 0.0f);
  copy_to_host(back.data(), on1.data(), bytes, s1);
  s1.synchronize();
  EXPECT_EQ(back, host);
  DeviceEvent on_device1(1);
  EXPECT_THROW(on_device1.record(s0), Error);  // an event is recorded on its own device's streams
}

#if ONNXTRAIN_WITH_CUDA
TEST(CudaContextGpu, WorkspaceGrowsAndIsReleasedWithItsStream) {
  REQUIRE_GPU(1);
  const uint64_t in_use_before = allocator_stats(0).bytes_in_use;
  {
    DeviceStream stream(0);
    const Stream ks = stream.kernel_stream(0);
    void* small = workspace(ks, 1000);
    EXPECT_EQ(workspace(ks, 500), small);  // a smaller request reuses the block
    void* big = workspace(ks, 8 << 20);
    ASSERT_NE(big, nullptr);
    ONNXTRAIN_CUDA_CHECK(cudaMemsetAsync(big, 0, 8 << 20, native_stream(ks)));
    EXPECT_EQ(workspace(ks, 8 << 20), big);
    EXPECT_GE(allocator_stats(0).bytes_in_use, in_use_before + (8 << 20));
    stream.synchronize();
  }
  // ~DeviceStream hands the stream's workspaces back to the allocator.
  EXPECT_EQ(allocator_stats(0).bytes_in_use, in_use_before);
}

TEST(CudaContextGpu, CublasHandlesArePerThreadAndBoundToTheStream) {
  REQUIRE_GPU(1);
  DeviceStream stream(0);
  const Stream ks = stream.kernel_stream(0);
  cublasHandle_t h = cublas_handle(ks);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(cublas_handle(ks), h);
  cudaStream_t bound = nullptr;
  ONNXTRAIN_CUBLAS_CHECK(cublasGetStream(h, &bound));
  EXPECT_EQ(bound, native_stream(ks));
  cublasHandle_t other_thread = nullptr;
  std::thread([&] { other_thread = cublas_handle(ks); }).join();
  EXPECT_NE(other_thread, nullptr);
  EXPECT_NE(other_thread, h);

  // A 2x2 SGEMM through the handle (column-major): C = A * B.
  const std::vector<float> a = {1, 2, 3, 4}, b = {5, 6, 7, 8};
  DeviceBuffer da(stream, 16), db(stream, 16), dc(stream, 16);
  copy_to_device(da.data(), a.data(), 16, stream);
  copy_to_device(db.data(), b.data(), 16, stream);
  const float one = 1.0f, zero = 0.0f;
  ONNXTRAIN_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, static_cast<const float*>(da.data()),
                                     2, static_cast<const float*>(db.data()), 2, &zero, static_cast<float*>(dc.data()),
                                     2));
  std::vector<float> c(4, 0.0f);
  copy_to_host(c.data(), dc.data(), 16, stream);
  stream.synchronize();
  EXPECT_EQ(c, (std::vector<float>{23, 34, 31, 46}));
#if ONNXTRAIN_HAVE_CUDNN
  cudnnHandle_t dnn = cudnn_handle(ks);
  ASSERT_NE(dnn, nullptr);
  EXPECT_EQ(cudnn_handle(ks), dnn);
#endif
}
#endif

}  // namespace
}  // namespace onnxtrain::cuda
