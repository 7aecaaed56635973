// A caching allocator for device memory (plain C++, no CUDA): blocks freed by the program are kept per
// stream and handed out again, so a training step that repeats the previous step's allocations asks the
// backend (cudaMalloc) for nothing. The backend is two functions, so the logic is tested on the CPU with
// a malloc-based fake (tests/caching_allocator_test.cc); kernels/cuda/cuda_runtime.cc backs one
// allocator per device with cudaMalloc/cudaFree.
//
//   CachingAllocator alloc("cuda:0", {.allocate = &my_malloc, .release = &my_free});
//   void* p = alloc.allocate(bytes, stream);   // cached block of `stream`, or a new backend block
//   alloc.free(p);                             // back to `stream`'s cache; the backend keeps the memory
//   alloc.empty_cache();                       // every cached block goes back to the backend
//
// Rules (a simplified PyTorch CUDACachingAllocator, without block splitting):
// - Requests are rounded up to a multiple of 512 bytes (a 0-byte request gets 512), so every block is a
//   distinct, non-null, 512-aligned-size pointer.
// - Blocks are cached per stream key and only reused by allocations on the same key: work queued on a
//   stream runs in order, so a block freed on stream S may be handed to the next allocation on S while
//   S still has work that reads it. A block used on another stream too needs that stream synchronised
//   (or an event waited on) before it is freed.
// - Best fit among the key's cached blocks, with a cap on the waste: a small request (rounded size up to
//   1 MiB) takes only a block of exactly its rounded size; a large one takes the smallest cached block no
//   larger than twice its rounded size. Otherwise the backend is asked for a block of the rounded size.
// - When the backend reports out-of-memory (allocate returns nullptr) while blocks are cached, the
//   allocator releases every cached block (all streams) and retries once; if there was nothing to
//   release, or the retry fails too, it throws Error with the bytes requested, in use and cached.
// - Thread-safe: one mutex guards the bookkeeping and the backend calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace onnxtrain {

// Where blocks come from. `allocate` returns nullptr when the memory is exhausted (the allocator then
// empties its cache and retries) and throws Error for any other failure; `release` frees a block that
// `allocate` returned.
struct AllocatorBackend {
  std::function<void*(size_t bytes)> allocate;
  std::function<void(void* ptr)> release;
};

struct CachingAllocatorStats {
  uint64_t backend_allocations = 0;  // successful backend allocate calls
  uint64_t backend_releases = 0;     // backend release calls (empty_cache, OOM retry)
  uint64_t cache_hits = 0;           // allocations served from the cache
  uint64_t bytes_in_use = 0;         // sizes of the blocks handed out and not freed
  uint64_t bytes_cached = 0;         // sizes of the free blocks kept for reuse
  uint64_t peak_bytes_in_use = 0;
};

class CachingAllocator {
 public:
  using StreamKey = const void*;
  static constexpr size_t kRoundBytes = 512;
  static constexpr size_t kSmallLimitBytes = size_t{1} << 20;  // up to here: exact size class only

  // `name` ("cuda:0") prefixes the out-of-memory message.
  CachingAllocator(std::string name, AllocatorBackend backend);
  // Releases every block to the backend, cached or still in use (a buffer that outlives its allocator
  // dangles). Backend errors are ignored here.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* allocate(size_t bytes, StreamKey stream);
  // Returns a block from allocate() to its stream's cache; an unknown pointer is a broken invariant.
  void free(void* ptr);
  // Hands every cached (free) block back to the backend; blocks in use stay.
  void empty_cache();

  CachingAllocatorStats stats() const;
  // The size of the block behind `ptr` (the rounded request, or the larger cached block reused).
  size_t block_bytes(const void* ptr) const;

  static size_t round_size(size_t bytes);

 private:
  struct Block {
    size_t bytes;
    StreamKey stream;
  };
  void* take_cached(size_t rounded, StreamKey stream);  // nullptr on a miss
  void release_cached_locked();

  std::string name_;
  AllocatorBackend backend_;
  mutable std::mutex mutex_;
  std::unordered_map<const void*, Block> in_use_;
  // Per stream: free blocks by size (several blocks may share a size).
  std::map<StreamKey, std::multimap<size_t, void*>> cached_;
  CachingAllocatorStats stats_;
};

}  // namespace onnxtrain
