// Working memory a CPU kernel needs only while it runs: oneDNN scratchpads, the blocked-layout copies its
// primitives read and write, the outputs of a statistics pass that the next step consumes. One arena per
// thread serves every kernel run on that thread, so the memory a session holds for them is the largest
// single kernel's need, not the sum over its kernels: kernel-owned buffers of that kind were 7.1 GB of the
// 9.9 GB peak RSS of a torchvision ResNet-50 training step at 224x224, batch 16 (heaptrack).
//
// Leases nest (a kernel that runs another kernel inside its run): each takes memory above the ones still
// held and gives it back when it ends. The arena grows by adding blocks while leases hold pointers into
// the old ones; when the outermost lease ends, the blocks are merged into one of their total size, so a
// second step of the same graph allocates nothing. The memory is not cleared.
//
//   ScratchArena::Lease lease;                  // this thread's arena
//   float* packed = lease.take<float>(n);       // valid until `lease` ends
//   memory.set_data_handle(lease.take(desc.get_size()));
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace onnxtrain {

class ScratchArena {
 public:
  // The calling thread's arena (made at its first use, freed when the thread ends).
  static ScratchArena& this_thread();

  class Lease {
   public:
    explicit Lease(ScratchArena& arena = ScratchArena::this_thread());
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

    // `bytes` of memory aligned to 64 bytes (a non-null pointer even for 0 bytes), valid until the lease
    // ends.
    std::byte* take(size_t bytes);
    template <typename T>
    T* take(size_t count) {
      return reinterpret_cast<T*>(take(count * sizeof(T)));
    }

   private:
    ScratchArena& arena_;
    size_t block_, offset_;  // the arena's position when the lease began
  };

  // Bytes the arena holds (its blocks' sizes).
  size_t capacity() const;

 private:
  struct Block {
    std::unique_ptr<std::byte[]> data;
    size_t size = 0;
  };
  std::byte* take(size_t bytes);
  void merge_blocks();

  std::vector<Block> blocks_;
  size_t block_ = 0, offset_ = 0;  // the next free byte: blocks_[block_].data + offset_
  int leases_ = 0;
};

}  // namespace onnxtrain
