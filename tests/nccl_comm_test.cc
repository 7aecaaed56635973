// Tests of the NCCL comm backend (executor/comm/nccl_comm.h). Without a GPU, or in a build without NCCL,
// the failure paths run: a clear Error on every rank of the bootstrap group, never a hang. The tests that
// move data need GPUs and skip, saying so, when too few are visible.
#include "executor/comm/nccl_comm.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "executor/comm/comm_info.h"
#include "executor/comm/local_comm.h"
#include "graph/error.h"
#include "kernels/cuda/cuda_runtime.h"

namespace onnxtrain {
namespace {

using namespace std::chrono_literals;

bool nccl_compiled() {
  for (const CommBackendInfo& b : comm_backends()) {
    if (b.name == "nccl") return b.compiled;
  }
  return false;
}

// The Error's message, or a marker when `f` did not throw one.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no Error thrown>";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Runs body(rank) on one thread per rank; returns each rank's error ("" when it succeeded). With
// `abort_on_error` a failing rank aborts the host group so the others stop waiting for it.
std::vector<std::string> run_ranks(std::vector<std::unique_ptr<Communicator>>& group,
                                   const std::function<void(int)>& body, bool abort_on_error = true) {
  std::vector<std::string> errors(group.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < group.size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        body(static_cast<int>(r));
      } catch (const std::exception& e) {
        errors[r] = e.what();
        if (abort_on_error) group[r]->abort(e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

TEST(NcclComm, OneRankWorldWithoutUsableDeviceThrowsClearError) {
  auto world = make_local_group(1, 10s);
  // On a machine without a GPU device 0 does not exist; on one with N GPUs, device N does not.
  const int count = cuda::device_count();
  const std::string message = error_of([&] { NcclCommunicator nccl(*world[0], count); });
  if (!nccl_compiled()) {
    EXPECT_TRUE(contains(message, "NCCL support not compiled in")) << message;
  } else if (count == 0) {
    EXPECT_TRUE(contains(message, "no CUDA device is visible")) << message;
    EXPECT_TRUE(contains(message, "rank 0 of 1 on cuda:0")) << message;
  } else {
    EXPECT_TRUE(contains(message, "cuda:" + std::to_string(count) + " requested but only")) << message;
  }
  // The failure was local to NCCL: the host communicator is not poisoned.
  EXPECT_FALSE(world[0]->aborted().has_value());
}

TEST(NcclComm, NegativeDeviceIsRejected) {
  auto world = make_local_group(1, 10s);
  const std::string message = error_of([&] { NcclCommunicator nccl(*world[0], -1); });
  EXPECT_TRUE(contains(message, nccl_compiled() ? "device index must be >= 0" : "NCCL support not compiled in"))
      << message;
}

TEST(NcclComm, EveryRankFailsTogetherWhenDevicesAreMissing) {
  // Three ranks whose devices lie beyond the visible ones: each must throw promptly (well inside the
  // host group's timeout, which would name the collective instead) and say which ranks lack a device.
  constexpr int kRanks = 3;
  auto world = make_local_group(kRanks, 20s);
  const int count = cuda::device_count();
  const auto start = std::chrono::steady_clock::now();
  // No abort: a rank done first must not poison the host group while the others still read its result.
  const std::vector<std::string> errors = run_ranks(
      world, [&](int r) { NcclCommunicator nccl(*world[static_cast<std::size_t>(r)], count + r); },
      /*abort_on_error=*/false);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  for (int r = 0; r < kRanks; ++r) {
    const std::string& message = errors[static_cast<std::size_t>(r)];
    if (!nccl_compiled()) {
      EXPECT_TRUE(contains(message, "NCCL support not compiled in")) << message;
      continue;
    }
    EXPECT_TRUE(contains(message, "rank " + std::to_string(r) + " of 3 on cuda:" + std::to_string(count + r)))
        << message;
    EXPECT_TRUE(contains(message, "rank(s) without a usable CUDA device: 0, 1, 2")) << message;
  }
}

TEST(NcclComm, CreateLocalRejectsBadDeviceLists) {
  const int count = cuda::device_count();
  const std::string empty = error_of([] { NcclCommunicator::create_local({}); });
  const std::string twice = error_of([] { NcclCommunicator::create_local({0, 1, 0}); });
  const std::string missing = error_of([&] { NcclCommunicator::create_local({count}); });
  if (!nccl_compiled()) {
    for (const std::string* m : {&empty, &twice, &missing}) {
      EXPECT_TRUE(contains(*m, "NCCL support not compiled in")) << *m;
    }
    return;
  }
  EXPECT_TRUE(contains(empty, "device list is empty")) << empty;
  EXPECT_TRUE(contains(twice, "cuda:0 is listed twice")) << twice;
  EXPECT_TRUE(contains(missing, count == 0 ? std::string("no CUDA device is visible")
                                           : "cuda:" + std::to_string(count) + " requested but only"))
      << missing;
}

TEST(NcclComm, EmptyGroupsNest) {
  // group_start/group_end need no GPU and no communicator; nested groups launch at the outermost end.
  if (!nccl_compiled()) {
    EXPECT_TRUE(contains(error_of([] { NcclGroup group; }), "NCCL support not compiled in"));
    return;
  }
  EXPECT_NO_THROW({
    NcclGroup outer;
    NcclCommunicator::group_start();
    NcclCommunicator::group_end();
  });
}

// --- with GPUs ---------------------------------------------------------------------------------------

std::vector<float> to_host(const cuda::DeviceBuffer& buffer, std::size_t count, const cuda::DeviceStream& stream) {
  std::vector<float> host(count);
  cuda::copy_to_host(host.data(), buffer.data(), count * sizeof(float), stream);
  stream.synchronize();
  return host;
}

TEST(NcclComm, OneRankAllReduceAndBroadcastAreTheIdentity) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  auto world = make_local_group(1, 60s);
  NcclCommunicator nccl(*world[0], 0);
  EXPECT_EQ(nccl.rank(), 0);
  EXPECT_EQ(nccl.size(), 1);
  EXPECT_EQ(nccl.device(), 0);

  // Values whose sum with anything else would round: a 1-rank sum must leave them bit for bit.
  std::vector<float> values(1027);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = 0.1f * static_cast<float>(i) - 1e-7f * static_cast<float>(i * i);
  cuda::DeviceStream stream(0);
  cuda::DeviceBuffer buffer(stream, values.size() * sizeof(float));
  cuda::copy_to_device(buffer.data(), values.data(), values.size() * sizeof(float), stream);
  nccl.all_reduce_sum(static_cast<float*>(buffer.data()), values.size(), stream.handle());
  EXPECT_EQ(to_host(buffer, values.size(), stream), values);
  nccl.broadcast(buffer.data(), values.size() * sizeof(float), /*root=*/0, stream.handle());
  EXPECT_EQ(to_host(buffer, values.size(), stream), values);

  const std::string bad_root = error_of([&] { nccl.broadcast(buffer.data(), 4, 1, stream.handle()); });
  EXPECT_TRUE(contains(bad_root, "broadcast root 1 is outside ranks 0..0")) << bad_root;
  const std::string bad_peer = error_of([&] { nccl.send(-1, buffer.data(), 4, stream.handle()); });
  EXPECT_TRUE(contains(bad_peer, "send to rank -1 is outside ranks 0..0")) << bad_peer;
}

TEST(NcclComm, CreateLocalAllReducesOverEveryVisibleGpu) {
  const int n = cuda::device_count();
  if (n == 0) GTEST_SKIP() << "no CUDA device visible";
  std::vector<int> devices;
  for (int d = 0; d < n; ++d) devices.push_back(d);
  auto comms = NcclCommunicator::create_local(devices);
  ASSERT_EQ(comms.size(), static_cast<std::size_t>(n));

  // Small integers: every order of addition gives the same exact sum, so the check can be exact even
  // though NCCL's order differs from the host backends'.
  constexpr std::size_t kCount = 4099;
  auto value = [](int rank, std::size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1)); };
  std::vector<std::unique_ptr<cuda::DeviceStream>> streams;
  std::vector<cuda::DeviceBuffer> buffers;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(comms[static_cast<std::size_t>(r)]->rank(), r);
    EXPECT_EQ(comms[static_cast<std::size_t>(r)]->size(), n);
    streams.push_back(std::make_unique<cuda::DeviceStream>(r));
    buffers.emplace_back(*streams.back(), kCount * sizeof(float));
    std::vector<float> host(kCount);
    for (std::size_t i = 0; i < kCount; ++i) host[i] = value(r, i);
    cuda::copy_to_device(buffers.back().data(), host.data(), kCount * sizeof(float), *streams.back());
  }
  {
    NcclGroup group;  // one thread drives every device: the collectives must be launched together
    for (int r = 0; r < n; ++r) {
      comms[static_cast<std::size_t>(r)]->all_reduce_sum(
          static_cast<float*>(buffers[static_cast<std::size_t>(r)].data()), kCount,
          streams[static_cast<std::size_t>(r)]->handle());
    }
  }
  for (int r = 0; r < n; ++r) {
    const std::vector<float> got =
        to_host(buffers[static_cast<std::size_t>(r)], kCount, *streams[static_cast<std::size_t>(r)]);
    for (std::size_t i = 0; i < kCount; ++i) {
      float expected = 0;
      for (int q = 0; q < n; ++q) expected += value(q, i);
      ASSERT_EQ(got[i], expected) << "rank " << r << " element " << i;
    }
  }
}

TEST(NcclComm, BootstrapOverHostGroupAllReducesOnThreads) {
  const int n = cuda::device_count();
  if (n == 0) GTEST_SKIP() << "no CUDA device visible";
  auto world = make_local_group(n, 60s);
  constexpr std::size_t kCount = 1000;
  std::vector<std::vector<float>> results(static_cast<std::size_t>(n));
  const std::vector<std::string> errors = run_ranks(world, [&](int r) {
    NcclCommunicator nccl(*world[static_cast<std::size_t>(r)], r);
    cuda::DeviceStream stream(r);
    cuda::DeviceBuffer buffer(stream, kCount * sizeof(float));
    std::vector<float> host(kCount);
    for (std::size_t i = 0; i < kCount; ++i) host[i] = static_cast<float>(r * 100 + static_cast<int>(i % 50));
    cuda::copy_to_device(buffer.data(), host.data(), kCount * sizeof(float), stream);
    nccl.all_reduce_sum(static_cast<float*>(buffer.data()), kCount, stream.handle());
    results[static_cast<std::size_t>(r)] = to_host(buffer, kCount, stream);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
    for (std::size_t i = 0; i < kCount; ++i) {
      float expected = 0;
      for (int q = 0; q < n; ++q) expected += static_cast<float>(q * 100 + static_cast<int>(i % 50));
      ASSERT_EQ(results[static_cast<std::size_t>(r)][i], expected) << "rank " << r << " element " << i;
    }
  }
}

TEST(NcclComm, SendRecvBetweenTwoGpusInOneGroup) {
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices, " << cuda::device_count() << " visible";
  auto world = make_local_group(2, 60s);
  // Like a pipeline step: rank 0 sends an activation forward while rank 1 sends a gradient back, both
  // in one group per rank (outside a group the two blocking sends would wait for each other).
  constexpr std::size_t kCount = 3001;
  auto payload = [](int from, std::size_t i) { return static_cast<float>(from * 10000 + static_cast<int>(i)); };
  std::vector<std::vector<float>> received(2);
  const std::vector<std::string> errors = run_ranks(world, [&](int r) {
    NcclCommunicator nccl(*world[static_cast<std::size_t>(r)], r);
    cuda::DeviceStream stream(r);
    cuda::DeviceBuffer out(stream, kCount * sizeof(float)), in(stream, kCount * sizeof(float));
    std::vector<float> host(kCount);
    for (std::size_t i = 0; i < kCount; ++i) host[i] = payload(r, i);
    cuda::copy_to_device(out.data(), host.data(), kCount * sizeof(float), stream);
    {
      NcclGroup group;
      nccl.send(1 - r, out.data(), kCount * sizeof(float), stream.handle());
      nccl.recv(1 - r, in.data(), kCount * sizeof(float), stream.handle());
    }
    received[static_cast<std::size_t>(r)] = to_host(in, kCount, stream);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[static_cast<std::size_t>(r)], "") << "rank " << r;
    for (std::size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(received[static_cast<std::size_t>(r)][i], payload(1 - r, i)) << "rank " << r << " element " << i;
    }
  }
}

TEST(NcclComm, AbortMakesLaterCallsThrow) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  auto world = make_local_group(1, 60s);
  NcclCommunicator nccl(*world[0], 0);
  EXPECT_FALSE(nccl.aborted());
  nccl.abort();
  nccl.abort();  // idempotent
  EXPECT_TRUE(nccl.aborted());
  const std::string message = error_of([&] { nccl.all_reduce_sum(nullptr, 0, nullptr); });
  EXPECT_TRUE(contains(message, "all_reduce_sum on an aborted communicator (rank 0 of 1 on cuda:0)")) << message;
}

}  // namespace
}  // namespace onnxtrain
