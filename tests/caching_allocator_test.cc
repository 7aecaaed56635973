// CachingAllocator on the CPU: a malloc-based fake backend that counts its calls and can run out of
// memory stands in for cudaMalloc/cudaFree.
#include "kernels/caching_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "executor/host_memory.h"
#include "graph/error.h"

namespace onnxtrain {
namespace {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * 1024;

// Counts calls, tracks live blocks and their bytes, and returns nullptr (out of memory) once the live
// bytes would exceed `capacity`. Thread-safe, like cudaMalloc.
class FakeBackend {
 public:
  explicit FakeBackend(size_t capacity = SIZE_MAX) : capacity_(capacity) {}
  ~FakeBackend() {
    for (auto& [ptr, bytes] : live_) std::free(ptr);
  }

  AllocatorBackend backend() {
    return {.allocate = [this](size_t bytes) { return allocate(bytes); },
            .release = [this](void* ptr) { release(ptr); }};
  }

  int allocate_calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return allocate_calls_;
  }
  int release_calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return release_calls_;
  }
  size_t live_blocks() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.size();
  }
  size_t live_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_bytes_;
  }

 private:
  void* allocate(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++allocate_calls_;
    if (live_bytes_ + bytes > capacity_) return nullptr;
    void* ptr = std::malloc(bytes);
    if (ptr == nullptr) throw std::bad_alloc();
    live_.emplace_back(ptr, bytes);
    live_bytes_ += bytes;
    return ptr;
  }
  void release(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++release_calls_;
    for (auto it = live_.begin(); it != live_.end(); ++it) {
      if (it->first == ptr) {
        live_bytes_ -= it->second;
        std::free(ptr);
        live_.erase(it);
        return;
      }
    }
    ADD_FAILURE() << "backend release of a pointer it never handed out";
  }

  size_t capacity_;
  mutable std::mutex mutex_;
  std::vector<std::pair<void*, size_t>> live_;
  size_t live_bytes_ = 0;
  int allocate_calls_ = 0;
  int release_calls_ = 0;
};

// Stream keys are opaque pointers (cudaStream_t on a GPU).
int stream_tokens[3];
const void* const kStreamA = &stream_tokens[0];
const void* const kStreamB = &stream_tokens[1];
const void* const kStreamC = &stream_tokens[2];

TEST(CachingAllocator, RoundsRequestsUpTo512Bytes) {
  EXPECT_EQ(CachingAllocator::round_size(0), 512u);
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(3 * MiB + 1), 3 * MiB + 512);
  EXPECT_THROW(CachingAllocator::round_size(SIZE_MAX - 10), Error);  // would wrap around

  FakeBackend fake;
  CachingAllocator alloc("cuda:test", fake.backend());
  void* zero = alloc.allocate(0, kStreamA);
  void* small = alloc.allocate(100, kStreamA);
  // A 0-byte request still gets its own block: callers may use the pointer as an identity.
  EXPECT_NE(zero, nullptr);
  EXPECT_NE(zero, small);
  EXPECT_EQ(alloc.block_bytes(small), 512u);
  EXPECT_EQ(alloc.stats().bytes_in_use, 1024u);
  alloc.free(zero);
  alloc.free(small);
}

// A training step: parameters' gradients and activations live across the step, temporaries come and go
// inside it; the same sizes every step. Only the first step may reach the backend.
TEST(CachingAllocator, RepeatedTrainingStepsAllocateFromTheBackendOnlyInTheFirstStep) {
  FakeBackend fake;
  CachingAllocator alloc("cuda:test", fake.backend());
  const std::vector<size_t> activations = {3 * MiB, 800 * KiB, 6 * MiB + 100, 4000, 1, 64 * KiB, 2 * MiB};
  const std::vector<size_t> temporaries = {1500, 5 * MiB, 12 * KiB};
  constexpr int kSteps = 6;

  uint64_t backend_after_first_step = 0;
  uint64_t peak_after_first_step = 0;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<void*> live;
    for (size_t bytes : activations) {  // forward
      live.push_back(alloc.allocate(bytes, kStreamA));
      std::memset(live.back(), step, bytes);  // ASan catches a block smaller than the request
      for (size_t t : temporaries) {
        void* tmp = alloc.allocate(t, kStreamA);
        std::memset(tmp, 0xff, t);
        alloc.free(tmp);
      }
    }
    for (auto it = live.rbegin(); it != live.rend(); ++it) alloc.free(*it);  // backward
    const CachingAllocatorStats s = alloc.stats();
    EXPECT_EQ(s.bytes_in_use, 0u) << "step " << step;
    if (step == 0) {
      backend_after_first_step = s.backend_allocations;
      peak_after_first_step = s.peak_bytes_in_use;
      // Each temporary is reused by the next activation's temporaries, so at most one block per size.
      EXPECT_EQ(s.backend_allocations, activations.size() + temporaries.size());
    } else {
      EXPECT_EQ(s.backend_allocations, backend_after_first_step) << "step " << step << " reached the backend";
      EXPECT_EQ(s.peak_bytes_in_use, peak_after_first_step);
    }
  }
  const size_t per_step = activations.size() * (1 + temporaries.size());
  const CachingAllocatorStats s = alloc.stats();
  EXPECT_EQ(s.cache_hits + s.backend_allocations, kSteps * per_step);
  EXPECT_EQ(static_cast<uint64_t>(fake.allocate_calls()), s.backend_allocations);
  EXPECT_EQ(fake.release_calls(), 0);
  EXPECT_EQ(s.bytes_cached, fake.live_bytes());
}

TEST(CachingAllocator, SmallRequestsReuseOnlyTheirExactSizeClass) {
  FakeBackend fake;
  CachingAllocator alloc("cuda:test", fake.backend());
  alloc.free(alloc.allocate(1024, kStreamA));
  // 512 would fit in the cached 1024-byte block, but small blocks are not handed out larger.
  void* p512 = alloc.allocate(512, kStreamA);
  EXPECT_EQ(alloc.block_bytes(p512), 512u);
  EXPECT_EQ(alloc.stats().backend_allocations, 2u);
  // 1000 rounds to 1024: the cached block.
  void* p1000 = alloc.allocate(1000, kStreamA);
  EXPECT_EQ(alloc.block_bytes(p1000), 1024u);
  EXPECT_EQ(alloc.stats().cache_hits, 1u);
  EXPECT_EQ(alloc.stats().backend_allocations, 2u);
  alloc.free(p512);
  alloc.free(p1000);
}

TEST(CachingAllocator, LargeRequestsTakeTheBestFitUpToTwiceTheirSize) {
  FakeBackend fake;
  CachingAllocator alloc("cuda:test", fake.backend());
  void* b8 = alloc.allocate(8 * MiB, kStreamA);
  void* b5 = alloc.allocate(5 * MiB, kStreamA);
  alloc.free(b8);
  alloc.free(b5);

  void* p4 = alloc.allocate(4 * MiB, kStreamA);  // 5 and 8 MiB are cached; 5 fits best
  EXPECT_EQ(p4, b5);
  EXPECT_EQ(alloc.block_bytes(p4), 5 * MiB);
  EXPECT_EQ(alloc.stats().bytes_in_use, 5 * MiB);  // the whole block counts as in use

  void* p3 = alloc.allocate(3 * MiB, kStreamA);  // only 8 MiB left: more than twice 3 MiB
  EXPECT_NE(p3, b8);
  EXPECT_EQ(alloc.block_bytes(p3), 3 * MiB);
  void* p4b = alloc.allocate(4 * MiB, kStreamA);  // exactly twice: taken
  EXPECT_EQ(p4b, b8);

  const CachingAllocatorStats s = alloc.stats();
  EXPECT_EQ(s.cache_hits, 2u);
  EXPECT_EQ(s.backend_allocations, 3u);
  EXPECT_EQ(s.bytes_cached, 0u);
  alloc.free(p4);
  alloc.free(p3);
  alloc.free(p4b);
  EXPECT_EQ(alloc.stats().bytes_cached, 16 * MiB);
}

TEST(CachingAllocator, StreamsDoNotShareCachedBlocks) {
  FakeBackend fake;
  CachingAllocator alloc("cuda:test", fake.backend());
  void* a = alloc.allocate(2 * MiB, kStreamA);
  alloc.free(a);
  void* b = alloc.allocate(2 * MiB, kStreamB);  // A's free block is not B's to take
  EXPECT_NE(a, b);
  EXPECT_EQ(alloc.stats().backend_allocations, 2u);
  EXPECT_EQ(alloc.stats().cache_hits, 0u);
  EXPECT_EQ(alloc.stats().bytes_cached, 2 * MiB);
  alloc.free(b);
  // Each stream gets its own block back.
  EXPECT_EQ(alloc.allocate(2 * MiB, kStreamB), b);
  EXPECT_EQ(alloc.allocate(2 * MiB, kStreamA), a);
  EXPECT_EQ(alloc.stats().cache_hits, 2u);
  alloc.free(a);
  alloc.free(b);
}

TEST(CachingAllocator, EmptyCacheReleasesFreeBlocksOnly) {
  FakeBackend fake;
  CachingAllocator alloc("cuda:test", fake.backend());
  void* kept = alloc.allocate(3 * MiB, kStreamA);
  alloc.free(alloc.allocate(1 * MiB, kStreamA));
  alloc.free(alloc.allocate(4096, kStreamB));
  EXPECT_EQ(fake.live_blocks(), 3u);

  alloc.empty_cache();
  CachingAllocatorStats s = alloc.stats();
  EXPECT_EQ(fake.live_blocks(), 1u);
  EXPECT_EQ(fake.release_calls(), 2);
  EXPECT_EQ(s.backend_releases, 2u);
  EXPECT_EQ(s.bytes_cached, 0u);
  EXPECT_EQ(s.bytes_in_use, 3 * MiB);

  alloc.free(kept);
  alloc.empty_cache();
  EXPECT_EQ(fake.live_blocks(), 0u);
  EXPECT_EQ(alloc.stats().bytes_cached, 0u);
  // After emptying, the next allocation goes to the backend again.
  alloc.free(alloc.allocate(3 * MiB, kStreamA));
  EXPECT_EQ(alloc.stats().backend_allocations, 4u);
}

TEST(CachingAllocator, OutOfMemoryReleasesTheCacheAndRetriesOnce) {
  FakeBackend fake(10 * MiB);
  CachingAllocator alloc("cuda:test", fake.backend());
  void* held = alloc.allocate(2 * MiB, kStreamA);
  alloc.free(alloc.allocate(4 * MiB, kStreamA));  // cached on A
  alloc.free(alloc.allocate(1 * MiB, kStreamC));  // cached on C
  // 6 MiB on B: 2 + 4 + 1 + 6 > 10, so the first backend call fails; releasing A's and C's cached blocks
  // makes room.
  void* big = alloc.allocate(6 * MiB, kStreamB);
  ASSERT_NE(big, nullptr);
  std::memset(big, 1, 6 * MiB);
  const CachingAllocatorStats s = alloc.stats();
  EXPECT_EQ(fake.allocate_calls(), 5);  // 3 + the failed one + the retry
  EXPECT_EQ(s.backend_allocations, 4u);
  EXPECT_EQ(s.backend_releases, 2u);
  EXPECT_EQ(s.bytes_cached, 0u);
  EXPECT_EQ(s.bytes_in_use, 8 * MiB);
  EXPECT_EQ(fake.live_bytes(), 8 * MiB);
  alloc.free(held);
  alloc.free(big);
}

TEST(CachingAllocator, OutOfMemoryErrorSaysWhatWasRequestedInUseAndCached) {
  FakeBackend fake(1 * MiB);
  CachingAllocator alloc("cuda:7", fake.backend());
  void* held = alloc.allocate(512 * KiB, kStreamA);
  try {
    alloc.allocate(2 * MiB + 1, kStreamA);
    FAIL() << "allocation beyond the backend's capacity succeeded";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cuda:7"), std::string::npos) << msg;
    EXPECT_NE(msg.find("out of memory allocating 2097153 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("524288 bytes in use"), std::string::npos) << msg;
    EXPECT_NE(msg.find("0 bytes cached"), std::string::npos) << msg;
  }
  // Nothing was cached, so there was nothing to release and no retry.
  EXPECT_EQ(fake.allocate_calls(), 2);
  EXPECT_EQ(fake.release_calls(), 0);

  // With a cached block the retry happens and fails too: the cache is gone, the error still thrown.
  alloc.free(alloc.allocate(256 * KiB, kStreamB));
  EXPECT_THROW(alloc.allocate(2 * MiB, kStreamA), Error);
  EXPECT_EQ(fake.allocate_calls(), 5);
  EXPECT_EQ(fake.release_calls(), 1);
  EXPECT_EQ(alloc.stats().bytes_cached, 0u);
  EXPECT_EQ(alloc.stats().bytes_in_use, 512 * KiB);  // a failed allocation leaves the books unchanged
  alloc.free(held);
}

TEST(CachingAllocator, BackendErrorsOtherThanOutOfMemoryPropagate) {
  CachingAllocator alloc("cuda:test", {.allocate = [](size_t) -> void* { throw Error("CUDA call failed: boom"); },
                                       .release = [](void*) {}});
  EXPECT_THROW(alloc.allocate(100, kStreamA), Error);
  EXPECT_EQ(alloc.stats().bytes_in_use, 0u);
  EXPECT_EQ(alloc.stats().backend_allocations, 0u);
}

TEST(CachingAllocator, FreeingAnUnknownPointerIsABrokenInvariant) {
  FakeBackend fake;
  CachingAllocator alloc("cuda:test", fake.backend());
  int not_from_the_allocator = 0;
  EXPECT_THROW(alloc.free(&not_from_the_allocator), std::logic_error);
  void* p = alloc.allocate(100, kStreamA);
  alloc.free(p);
  EXPECT_THROW(alloc.free(p), std::logic_error);  // a double free
  EXPECT_EQ(alloc.stats().bytes_cached, 512u);    // and the books are as after the first free
}

TEST(CachingAllocator, PeakTracksTheHighestBytesInUse) {
  FakeBackend fake;
  CachingAllocator alloc("cuda:test", fake.backend());
  void* a = alloc.allocate(1 * MiB, kStreamA);
  void* b = alloc.allocate(2 * MiB, kStreamA);
  alloc.free(a);
  void* c = alloc.allocate(512, kStreamA);
  EXPECT_EQ(alloc.stats().peak_bytes_in_use, 3 * MiB);
  EXPECT_EQ(alloc.stats().bytes_in_use, 2 * MiB + 512);
  alloc.free(b);
  alloc.free(c);
  EXPECT_EQ(alloc.stats().peak_bytes_in_use, 3 * MiB);
}

TEST(CachingAllocator, DestroyingTheAllocatorReleasesEveryBlock) {
  FakeBackend fake;
  {
    CachingAllocator alloc("cuda:test", fake.backend());
    alloc.allocate(4096, kStreamA);  // still in use at destruction
    alloc.free(alloc.allocate(2 * MiB, kStreamB));
    EXPECT_EQ(fake.live_blocks(), 2u);
  }
  EXPECT_EQ(fake.live_blocks(), 0u);
  EXPECT_EQ(fake.release_calls(), 2);
}

// Two threads, each with its own stream and both sharing a third: every block handed out is marked
// with the thread's pattern at both ends and checked before it is freed, so two threads given the same block at once
// would see each other's bytes. (TSan checks the locking in the sanitizer build.)
TEST(CachingAllocator, TwoThreadsAllocateAndFreeConcurrently) {
  FakeBackend fake;
  CachingAllocator alloc("cuda:test", fake.backend());
  const std::vector<size_t> sizes = {512, 3000, 64 * KiB, 1 * MiB + 1, 3 * MiB};
  constexpr int kIterations = 400;
  std::vector<std::string> failures(2);

  auto worker = [&](int id) {
    const void* own_stream = id == 0 ? kStreamA : kStreamB;
    const unsigned char pattern = static_cast<unsigned char>(0x10 + id);
    for (int i = 0; i < kIterations; ++i) {
      std::vector<std::pair<unsigned char*, size_t>> held;
      for (size_t k = 0; k < sizes.size(); ++k) {
        const size_t bytes = sizes[(i + k) % sizes.size()];
        const void* stream = k % 2 == 0 ? own_stream : kStreamC;
        auto* p = static_cast<unsigned char*>(alloc.allocate(bytes, stream));
        // The block's first and last bytes carry the pattern (enough to see sharing, cheap under TSan).
        std::memset(p, pattern, std::min<size_t>(bytes, 256));
        std::memset(p + bytes - std::min<size_t>(bytes, 256), pattern, std::min<size_t>(bytes, 256));
        held.emplace_back(p, bytes);
      }
      std::this_thread::yield();
      for (auto& [p, bytes] : held) {
        if ((p[0] != pattern || p[bytes - 1] != pattern) && failures[id].empty()) {
          failures[id] = "block shared between threads";
        }
        alloc.free(p);
      }
    }
  };
  std::thread t0(worker, 0);
  std::thread t1(worker, 1);
  t0.join();
  t1.join();

  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
  const CachingAllocatorStats s = alloc.stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.cache_hits + s.backend_allocations, 2u * kIterations * sizes.size());
  EXPECT_EQ(s.bytes_cached, fake.live_bytes());
  // The cache bounds the backend traffic: far fewer backend blocks than allocations.
  EXPECT_LT(s.backend_allocations, 2u * 4 * sizes.size());
}

// A data loader's CPU batches (executor/host_memory.h): the block of a batch that is gone serves the next
// batch of its size, so no batch after the first ones maps fresh pages; a live batch keeps its block.
TEST(RecycledHostTensor, ABlockServesTheNextTensorOnceItsTensorIsGone) {
  const std::vector<int64_t> sizes = {3, 1 << 20};  // 12 MiB
  Tensor first = recycled_host_tensor(DType::Float32, sizes);
  ASSERT_EQ(first.sizes(), sizes);
  ASSERT_EQ(first.dtype(), DType::Float32);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first.raw()) % 64, 0u);
  first.data<float>()[0] = 7.0f;
  std::byte* const block = first.raw();
  Tensor second = recycled_host_tensor(DType::Float32, sizes);
  EXPECT_NE(second.raw(), block) << "a live tensor's block is not handed out again";
  Tensor copy = first;
  first = Tensor();
  Tensor third = recycled_host_tensor(DType::Float32, sizes);
  EXPECT_NE(third.raw(), block) << "a copy still holds it";
  copy = Tensor();
  Tensor fourth = recycled_host_tensor(DType::Float32, sizes);
  EXPECT_EQ(fourth.raw(), block) << "the freed block serves the next tensor of its size";
  EXPECT_EQ(recycled_host_tensor(DType::Int64, {0}).numel(), 0);
}

}  // namespace
}  // namespace onnxtrain
