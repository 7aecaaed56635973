#include "kernels/scratch_arena.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

namespace onnxtrain {

namespace {

constexpr size_t kAlignment = 64;  // a cache line: what oneDNN asks of its buffers

size_t round_up(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// Uninitialised: the kernels write what they read back.
std::unique_ptr<std::byte[]> allocate(size_t bytes) { return std::unique_ptr<std::byte[]>(new std::byte[bytes]); }

}  // namespace

ScratchArena& ScratchArena::this_thread() {
  thread_local ScratchArena arena;
  return arena;
}

size_t ScratchArena::capacity() const {
  return std::accumulate(blocks_.begin(), blocks_.end(), size_t{0},
                         [](size_t sum, const Block& b) { return sum + b.size; });
}

// new[] of std::byte aligns to __STDCPP_DEFAULT_NEW_ALIGNMENT__ (16) only: each block is over-allocated by
// one alignment and handed out from its first 64-byte boundary.
std::byte* ScratchArena::take(size_t bytes) {
  bytes = round_up(bytes);
  const auto aligned = [](const Block& b) {
    const auto address = reinterpret_cast<uintptr_t>(b.data.get());
    return b.data.get() + (round_up(address) - address);
  };
  while (block_ < blocks_.size() && offset_ + bytes > blocks_[block_].size) {
    ++block_;
    offset_ = 0;
  }
  if (block_ == blocks_.size()) {
    // Geometric growth: at least what the arena holds already, so a growing need adds few blocks.
    const size_t size = std::max(round_up(bytes), std::max(capacity(), size_t{1} << 20));
    blocks_.push_back({allocate(size + kAlignment), size});
    offset_ = 0;
  }
  std::byte* p = aligned(blocks_[block_]) + offset_;
  offset_ += bytes;
  return p;
}

// With no lease left nothing points into the blocks: one block of their total replaces them.
void ScratchArena::merge_blocks() {
  if (blocks_.size() <= 1) return;
  const size_t total = capacity();
  blocks_.clear();
  blocks_.push_back({allocate(total + kAlignment), total});
}

ScratchArena::Lease::Lease(ScratchArena& arena) : arena_(arena), block_(arena.block_), offset_(arena.offset_) {
  ++arena_.leases_;
}

ScratchArena::Lease::~Lease() {
  arena_.block_ = block_;
  arena_.offset_ = offset_;
  if (--arena_.leases_ == 0) arena_.merge_blocks();
}

std::byte* ScratchArena::Lease::take(size_t bytes) { return arena_.take(bytes); }

}  // namespace onnxtrain
