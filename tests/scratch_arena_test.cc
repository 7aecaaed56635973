// ScratchArena (kernels/scratch_arena.h): aligned, non-overlapping memory per lease, nested leases that
// give memory back in order, growth that keeps what older leases hold, one block after the outermost
// lease, one arena per thread.
#include "kernels/scratch_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>

namespace onnxtrain {
namespace {

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(ScratchArena, TakesAreAlignedAndDisjointWithinALease) {
  ScratchArena arena;
  ScratchArena::Lease lease(arena);
  std::byte* a = lease.take(100);
  std::byte* b = lease.take(1);
  std::byte* c = lease.take(0);
  for (const std::byte* p : {a, b, c}) EXPECT_TRUE(aligned(p));
  EXPECT_GE(b, a + 100);
  EXPECT_GT(c, b);
}

TEST(ScratchArena, AnInnerLeaseGivesItsMemoryBackWhenItEnds) {
  ScratchArena arena;
  ScratchArena::Lease outer(arena);
  std::byte* first = outer.take(4096);
  std::byte* inner_memory = nullptr;
  {
    ScratchArena::Lease inner(arena);
    inner_memory = inner.take(4096);
    EXPECT_GE(inner_memory, first + 4096);
  }
  EXPECT_EQ(outer.take(4096), inner_memory) << "the inner lease's memory is reused";
}

TEST(ScratchArena, GrowingKeepsWhatEarlierLeasesHoldAndMergesAfterTheLast) {
  ScratchArena arena;
  {
    ScratchArena::Lease outer(arena);
    auto* kept = outer.take<uint32_t>(1000);
    for (uint32_t i = 0; i < 1000; ++i) kept[i] = i * 7u;
    {
      ScratchArena::Lease inner(arena);
      std::byte* big = inner.take(64 << 20);  // far beyond the first block: a new one
      std::memset(big, 0xff, 64 << 20);
      for (uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(kept[i], i * 7u) << "at " << i;
    }
  }
  const size_t merged = arena.capacity();
  EXPECT_GE(merged, size_t{64} << 20);
  {
    ScratchArena::Lease again(arena);  // the same needs again: served by the merged block, nothing added
    again.take(4000);
    again.take(64 << 20);
  }
  EXPECT_EQ(arena.capacity(), merged);
}

TEST(ScratchArena, EachThreadHasItsOwnArena) {
  ScratchArena* main_arena = &ScratchArena::this_thread();
  ScratchArena* other = nullptr;
  std::thread([&] { other = &ScratchArena::this_thread(); }).join();
  EXPECT_NE(main_arena, other);
  EXPECT_EQ(main_arena, &ScratchArena::this_thread());
}

}  // namespace
}  // namespace onnxtrain
