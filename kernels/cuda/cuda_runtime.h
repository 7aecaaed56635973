// The CUDA runtime as the executor sees it: streams, events, device memory from a caching allocator,
// pinned host memory and copies. Plain C++ (no CUDA headers), so executor/ code may include it; with
// CUDA compiled out (cuda_runtime_stub.cc) device_count() is 0 and everything else throws Error.
//
//   cuda::DeviceStream stream(0);                                 // a non-blocking stream on cuda:0
//   cuda::DeviceBuffer x(stream, bytes);                          // from the cache: no cudaMalloc per step
//   cuda::copy_to_device(x.data(), host_ptr, bytes, stream);      // async (pinned) or staged
//   kernel->run(stream.kernel_stream(run_index), inputs, outputs);
//   cuda::copy_to_host(host_ptr, x.data(), bytes, stream);
//   stream.synchronize();                                         // before reading host_ptr
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/tensor.h"
#include "kernels/kernel.h"

namespace onnxtrain::cuda {

// Visible CUDA devices; 0 without a GPU, without a driver, or with CUDA compiled out. Never throws.
int device_count();

// Throws Error unless cuda:`device` exists: "cuda:3 requested but 2 CUDA devices are visible ...".
void require_device(int device, const std::string& what);

// An owned non-blocking stream on one device.
class DeviceStream {
 public:
  explicit DeviceStream(int device);
  ~DeviceStream();
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;

  int device() const { return device_; }
  void* handle() const { return handle_; }  // cudaStream_t
  // The kernel-facing view of this stream for run `run_index` (kernels/kernel.h).
  Stream kernel_stream(uint64_t run_index) const { return Stream(DeviceKind::Cuda, run_index, handle_, device_); }
  void synchronize() const;  // waits for all work queued so far; throws Error on an asynchronous fault

 private:
  int device_;
  void* handle_ = nullptr;
};

// A recorded point in a stream, for cross-stream (cross-stage) dependencies without host waits; a timing
// event (EventTiming::On, for profiles) also measures the GPU time between two recorded points.
enum class EventTiming { Off, On };
class DeviceEvent {
 public:
  explicit DeviceEvent(int device, EventTiming timing = EventTiming::Off);
  ~DeviceEvent();
  DeviceEvent(const DeviceEvent&) = delete;
  DeviceEvent& operator=(const DeviceEvent&) = delete;
  void record(const DeviceStream& stream);
  void make_wait(const DeviceStream& stream) const;  // `stream` waits for the recorded point
  void synchronize() const;
  // Whether the work before the recorded point has finished (cudaEventQuery; no wait). Throws Error on an
  // asynchronous fault.
  bool ready() const;
  // Milliseconds of GPU time from `earlier`'s recorded point to this one's, both timing events whose work
  // has finished (cudaEventElapsedTime: about 0.5 us resolution).
  float ms_since(const DeviceEvent& earlier) const;

 private:
  int device_;
  void* handle_ = nullptr;  // cudaEvent_t
};

// Device memory on `device` from its caching allocator, ordered on `stream`: freeing returns the block
// to that stream's cache (safe in stream order); memory is handed back to CUDA only by empty_cache().
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceStream& stream, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  void release();
  int device_ = 0;
  void* stream_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory (cudaHostAlloc) for asynchronous copies: data loading, staging.
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  explicit PinnedHostBuffer(size_t bytes);
  ~PinnedHostBuffer();
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer& operator=(PinnedHostBuffer&& other) noexcept;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// A host tensor in page-locked memory from a caching pool (cudaHostAlloc once per size class, reused when
// the tensor's last copy goes), zero-filled like Tensor(dtype, sizes): uploading it is an asynchronous
// DMA without the runtime's staging copy. For batches made on a data loader's thread (PyTorch's
// pin_memory). `device`: the GPU the batches go to; its CUDA context makes the allocation (so a process
// on cuda:3 starts no context on cuda:0); the memory is portable to every device. A block is reused as
// soon as its tensor goes: drop it only after the uploads reading it are complete (a session run waits
// for its stream before it returns). Throws Error when `device` is not visible.
Tensor pinned_tensor(int device, DType dtype, std::vector<int64_t> sizes);
// Stream-ordered copies. From pageable host memory a copy to the device returns once the source may be
// reused; copy_to_host into pageable memory is complete only after stream.synchronize().
void copy_to_device(void* device_dst, const void* host_src, size_t bytes, const DeviceStream& stream);
void copy_to_host(void* host_dst, const void* device_src, size_t bytes, const DeviceStream& stream);
void copy_on_device(void* dst, const void* src, size_t bytes, const DeviceStream& stream);
// Between devices (stages in one process): a peer copy when peer access is possible, staged otherwise.
void copy_between_devices(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                          const DeviceStream& stream);

// What a device's caching allocator has done: for tests and the memory report.
struct DeviceAllocatorStats {
  uint64_t device_allocations = 0;  // cudaMalloc calls
  uint64_t cache_hits = 0;          // allocations served from the cache
  uint64_t bytes_in_use = 0;
  uint64_t bytes_cached = 0;  // free blocks kept for reuse
  uint64_t peak_bytes_in_use = 0;
};
DeviceAllocatorStats allocator_stats(int device);
void empty_cache(int device);  // hands every cached free block back to CUDA
// pinned_tensor's pool (device_allocations counts its cudaHostAlloc calls).
DeviceAllocatorStats pinned_allocator_stats();

}  // namespace onnxtrain::cuda
