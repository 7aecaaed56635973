// The caching allocator's bookkeeping (rules in caching_allocator.h).
#include "kernels/caching_allocator.h"

#include <algorithm>
#include <utility>

#include "graph/error.h"

namespace onnxtrain {

CachingAllocator::CachingAllocator(std::string name, AllocatorBackend backend)
    : name_(std::move(name)), backend_(std::move(backend)) {
  ONNXTRAIN_CHECK(backend_.allocate && backend_.release, "CachingAllocator needs an allocate and a release function");
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [stream, blocks] : cached_) {
    for (auto& [bytes, ptr] : blocks) {
      try {
        backend_.release(ptr);
      } catch (...) {  // a destructor must not throw; the process is usually exiting anyway
      }
    }
  }
  for (auto& [ptr, block] : in_use_) {
    try {
      backend_.release(const_cast<void*>(ptr));
    } catch (...) {
    }
  }
}

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes < kRoundBytes) return kRoundBytes;
  // A corrupt or absurd shape can ask for this much: the user's error, not a broken invariant.
  if (bytes > SIZE_MAX - kRoundBytes) throw Error("cannot allocate " + std::to_string(bytes) + " bytes");
  return (bytes + kRoundBytes - 1) / kRoundBytes * kRoundBytes;
}

void* CachingAllocator::take_cached(size_t rounded, StreamKey stream) {
  auto per_stream = cached_.find(stream);
  if (per_stream == cached_.end()) return nullptr;
  auto& blocks = per_stream->second;
  auto it = blocks.lower_bound(rounded);  // the smallest block that fits
  if (it == blocks.end()) return nullptr;
  const size_t limit = rounded <= kSmallLimitBytes ? rounded : rounded * 2;
  if (it->first > limit) return nullptr;
  void* ptr = it->second;
  const size_t bytes = it->first;
  blocks.erase(it);
  if (blocks.empty()) cached_.erase(per_stream);
  stats_.bytes_cached -= bytes;
  in_use_.emplace(ptr, Block{bytes, stream});
  return ptr;
}

void CachingAllocator::release_cached_locked() {
  for (auto per_stream = cached_.begin(); per_stream != cached_.end();) {
    auto& blocks = per_stream->second;
    while (!blocks.empty()) {
      auto it = blocks.begin();
      // Erase after a successful release only, so a throwing backend leaves the bookkeeping consistent.
      backend_.release(it->second);
      stats_.bytes_cached -= it->first;
      ++stats_.backend_releases;
      blocks.erase(it);
    }
    per_stream = cached_.erase(per_stream);
  }
}

void* CachingAllocator::allocate(size_t bytes, StreamKey stream) {
  const size_t rounded = round_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  void* ptr = take_cached(rounded, stream);
  if (ptr != nullptr) {
    ++stats_.cache_hits;
  } else {
    ptr = backend_.allocate(rounded);
    if (ptr == nullptr && stats_.bytes_cached > 0) {
      // Out of memory while other streams (or other size classes) hold free blocks: give them back.
      release_cached_locked();
      ptr = backend_.allocate(rounded);
    }
    if (ptr == nullptr) {
      throw Error(name_ + ": out of memory allocating " + std::to_string(bytes) + " bytes (" + std::to_string(rounded) +
                  " rounded); " + std::to_string(stats_.bytes_in_use) + " bytes in use, " +
                  std::to_string(stats_.bytes_cached) + " bytes cached, peak " +
                  std::to_string(stats_.peak_bytes_in_use) + " bytes in use");
    }
    ++stats_.backend_allocations;
    in_use_.emplace(ptr, Block{rounded, stream});
  }
  stats_.bytes_in_use += in_use_.at(ptr).bytes;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return ptr;
}

void CachingAllocator::free(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_use_.find(ptr);
  ONNXTRAIN_CHECK(it != in_use_.end(), name_ + ": free of a pointer this allocator did not hand out (or freed twice)");
  const Block block = it->second;
  in_use_.erase(it);
  stats_.bytes_in_use -= block.bytes;
  stats_.bytes_cached += block.bytes;
  cached_[block.stream].emplace(block.bytes, ptr);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

CachingAllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

size_t CachingAllocator::block_bytes(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_use_.find(ptr);
  ONNXTRAIN_CHECK(it != in_use_.end(), name_ + ": block_bytes of a pointer not in use");
  return it->second.bytes;
}

}  // namespace onnxtrain
