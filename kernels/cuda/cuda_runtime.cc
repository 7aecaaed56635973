// The CUDA runtime behind kernels/cuda/cuda_runtime.h: streams, events, device memory from one
// CachingAllocator per device (cudaMalloc/cudaFree behind it), pinned host memory and copies. Host code
// only (no kernels), so g++ compiles it.
#include "kernels/cuda/cuda_runtime.h"

#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "graph/error.h"
#include "kernels/caching_allocator.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_runtime_internal.h"

namespace onnxtrain::cuda {

using detail::device_allocator;

namespace {

// cudaSetDevice for a scope, restoring the previous device (the Stream-based DeviceGuard of
// cuda_context.h needs a kernel Stream; this one takes an index).
class DeviceIndexGuard {
 public:
  explicit DeviceIndexGuard(int device) {
    ONNXTRAIN_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) ONNXTRAIN_CUDA_CHECK(cudaSetDevice(device));
    changed_ = previous_ != device;
  }
  ~DeviceIndexGuard() {
    if (changed_) (void)cudaSetDevice(previous_);  // a destructor must not throw
  }
  DeviceIndexGuard(const DeviceIndexGuard&) = delete;
  DeviceIndexGuard& operator=(const DeviceIndexGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

AllocatorBackend cuda_malloc_backend(int device) {
  return AllocatorBackend{
      .allocate = [device](size_t bytes) -> void* {
        DeviceIndexGuard guard(device);
        void* ptr = nullptr;
        const cudaError_t err = cudaMalloc(&ptr, bytes);
        if (err == cudaErrorMemoryAllocation) {
          (void)cudaGetLastError();  // not sticky: clear it so the retry and later calls start clean
          return nullptr;
        }
        ONNXTRAIN_CUDA_CHECK(err);
        return ptr;
      },
      // cudaFree waits for the device to finish the work in flight, so a block still read by a queued
      // kernel is not freed under it.
      .release =
          [device](void* ptr) {
            DeviceIndexGuard guard(device);
            ONNXTRAIN_CUDA_CHECK(cudaFree(ptr));
          },
  };
}

// Peer access is enabled once per ordered (accessing device, peer) pair, for the life of the process.
void enable_peer_access_once(int device, int peer) {
  static std::mutex mutex;
  static std::set<std::pair<int, int>> tried;
  std::lock_guard<std::mutex> lock(mutex);
  if (!tried.insert({device, peer}).second) return;
  int can_access = 0;
  ONNXTRAIN_CUDA_CHECK(cudaDeviceCanAccessPeer(&can_access, device, peer));
  if (!can_access) return;  // cudaMemcpyPeerAsync stages through the host
  DeviceIndexGuard guard(device);
  const cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // someone else (NCCL, a library) enabled it first: fine
    return;
  }
  ONNXTRAIN_CUDA_CHECK(err);
}

cudaStream_t native(const DeviceStream& stream) { return static_cast<cudaStream_t>(stream.handle()); }

}  // namespace

int device_count() {
  // CUDA_VISIBLE_DEVICES is read once, when the runtime initialises, so the count cannot change.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // no driver or no device: clear the error for later calls
      return 0;
    }
    return n;
  }();
  return count;
}

void require_device(int device, const std::string& what) {
  const int count = device_count();
  if (device >= 0 && device < count) return;
  std::string visible = count == 1 ? "1 CUDA device is visible" : std::to_string(count) + " CUDA devices are visible";
  if (count == 0) {
    visible += " (no GPU, no NVIDIA driver, or CUDA_VISIBLE_DEVICES hides them)";
  } else {
    visible += " (cuda:0.." + std::to_string(count - 1) + "; CUDA_VISIBLE_DEVICES selects them)";
  }
  throw Error(what + ": cuda:" + std::to_string(device) + " requested but " + visible);
}

// One allocator per device, created on first use. Never destroyed: at process exit the CUDA runtime may
// already be torn down when static destructors run, and the driver reclaims device memory anyway.
CachingAllocator& detail::device_allocator(int device) {
  require_device(device, "device memory");
  static std::mutex mutex;
  static auto* allocators = new std::vector<std::unique_ptr<CachingAllocator>>();
  std::lock_guard<std::mutex> lock(mutex);
  if (allocators->empty()) allocators->resize(device_count());
  auto& slot = (*allocators)[device];
  if (!slot) slot = std::make_unique<CachingAllocator>("cuda:" + std::to_string(device), cuda_malloc_backend(device));
  return *slot;
}

// --- DeviceStream ---------------------------------------------------------------------------------------

DeviceStream::DeviceStream(int device) : device_(device) {
  require_device(device, "DeviceStream");
  DeviceIndexGuard guard(device);
  cudaStream_t stream = nullptr;
  // Non-blocking: no implicit synchronisation with the legacy default stream that libraries may use.
  ONNXTRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  handle_ = stream;
}

DeviceStream::~DeviceStream() {
  if (handle_ == nullptr) return;
  // Finish the queued work before the handle can be reused by a new stream: blocks cached under this
  // handle (allocator, workspaces) are then idle, whoever gets the handle value next.
  (void)cudaStreamSynchronize(native(*this));
  try {
    detail::release_stream_workspaces(device_, handle_);
  } catch (...) {  // a destructor must not throw
  }
  (void)cudaStreamDestroy(native(*this));
}

void DeviceStream::synchronize() const { ONNXTRAIN_CUDA_CHECK(cudaStreamSynchronize(native(*this))); }

// --- DeviceEvent ----------------------------------------------------------------------------------------

DeviceEvent::DeviceEvent(int device, EventTiming timing) : device_(device) {
  require_device(device, "DeviceEvent");
  DeviceIndexGuard guard(device);
  cudaEvent_t event = nullptr;
  // Without timing an event is cheaper to record and wait on: ordering events do not time.
  ONNXTRAIN_CUDA_CHECK(
      cudaEventCreateWithFlags(&event, timing == EventTiming::On ? cudaEventDefault : cudaEventDisableTiming));
  handle_ = event;
}

DeviceEvent::~DeviceEvent() {
  if (handle_ != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
}

void DeviceEvent::record(const DeviceStream& stream) {
  if (stream.device() != device_) {
    throw Error("DeviceEvent of cuda:" + std::to_string(device_) + " recorded on a stream of cuda:" +
                std::to_string(stream.device()) + " (an event is recorded on its own device's streams)");
  }
  DeviceIndexGuard guard(device_);
  ONNXTRAIN_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), native(stream)));
}

void DeviceEvent::make_wait(const DeviceStream& stream) const {
  // Works across devices: the waiting stream may live on another GPU.
  DeviceIndexGuard guard(stream.device());
  ONNXTRAIN_CUDA_CHECK(cudaStreamWaitEvent(native(stream), static_cast<cudaEvent_t>(handle_), 0));
}

void DeviceEvent::synchronize() const { ONNXTRAIN_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_))); }

bool DeviceEvent::ready() const {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(handle_));
  if (status == cudaErrorNotReady) return false;
  ONNXTRAIN_CUDA_CHECK(status);
  return true;
}

float DeviceEvent::ms_since(const DeviceEvent& earlier) const {
  float ms = 0;
  ONNXTRAIN_CUDA_CHECK(
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(earlier.handle_), static_cast<cudaEvent_t>(handle_)));
  return ms;
}

// --- DeviceBuffer ---------------------------------------------------------------------------------------

DeviceBuffer::DeviceBuffer(const DeviceStream& stream, size_t bytes)
    : device_(stream.device()), stream_(stream.handle()), bytes_(bytes) {
  data_ = device_allocator(device_).allocate(bytes, stream_);
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(other.device_),
      stream_(std::exchange(other.stream_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    stream_ = std::exchange(other.stream_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::release() {
  if (data_ == nullptr) return;
  // Back to the stream's cache: the next allocation on that stream may take it while queued work still
  // reads it, which stream order makes safe.
  device_allocator(device_).free(data_);
  data_ = nullptr;
  bytes_ = 0;
}

// --- PinnedHostBuffer -----------------------------------------------------------------------------------

PinnedHostBuffer::PinnedHostBuffer(size_t bytes) : bytes_(bytes) {
  require_device(0, "pinned host memory");
  if (bytes == 0) return;
  // Portable: page-locked for every device of the process, not only the current one.
  ONNXTRAIN_CUDA_CHECK(cudaHostAlloc(&data_, bytes, cudaHostAllocPortable));
}

PinnedHostBuffer::~PinnedHostBuffer() {
  if (data_ != nullptr) (void)cudaFreeHost(data_);
}

PinnedHostBuffer::PinnedHostBuffer(PinnedHostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedHostBuffer& PinnedHostBuffer::operator=(PinnedHostBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) (void)cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

// --- pinned tensors ---------------------------------------------------------------------------------------

namespace {

// Never destroyed, as the device allocators: tensors may outlive static destruction order.
CachingAllocator& pinned_allocator() {
  static auto* allocator = new CachingAllocator(
      "pinned host memory", AllocatorBackend{.allocate = [](size_t bytes) -> void* {
                                               void* ptr = nullptr;
                                               const cudaError_t err =
                                                   cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable);
                                               if (err == cudaErrorMemoryAllocation) {
                                                 (void)cudaGetLastError();
                                                 return nullptr;
                                               }
                                               ONNXTRAIN_CUDA_CHECK(err);
                                               return ptr;
                                             },
                                             .release = [](void* ptr) { ONNXTRAIN_CUDA_CHECK(cudaFreeHost(ptr)); }});
  return *allocator;
}

DeviceAllocatorStats stats_of(const CachingAllocatorStats& s) {
  return DeviceAllocatorStats{.device_allocations = s.backend_allocations,
                              .cache_hits = s.cache_hits,
                              .bytes_in_use = s.bytes_in_use,
                              .bytes_cached = s.bytes_cached,
                              .peak_bytes_in_use = s.peak_bytes_in_use};
}

}  // namespace

Tensor pinned_tensor(int device, DType dtype, std::vector<int64_t> sizes) {
  require_device(device, "pinned host memory");
  const size_t bytes = static_cast<size_t>(TensorDesc{dtype, sizes}.numel()) * dtype_size(dtype);
  if (bytes == 0) return Tensor(dtype, std::move(sizes));
  CachingAllocator& pool = pinned_allocator();
  DeviceIndexGuard guard(device);  // the calling thread (a loader's) would otherwise use cuda:0's context
  // Host memory has no stream: every block is in one cache (key null).
  auto* block = static_cast<std::byte*>(pool.allocate(bytes, nullptr));
  std::memset(block, 0, bytes);
  return Tensor::wrap(dtype, std::move(sizes),
                      std::shared_ptr<std::byte>(block, [&pool](std::byte* p) { pool.free(p); }));
}

DeviceAllocatorStats pinned_allocator_stats() { return stats_of(pinned_allocator().stats()); }

// --- copies ---------------------------------------------------------------------------------------------
// cudaMemcpyAsync with pinned host memory is truly asynchronous. With pageable memory the runtime stages
// through its own pinned buffer: a host-to-device copy returns once the source has been staged (the
// source may be reused, the copy itself may still be in flight); a device-to-host copy into pageable
// memory may return before the data has landed, so callers read host_dst after stream.synchronize().

void copy_to_device(void* device_dst, const void* host_src, size_t bytes, const DeviceStream& stream) {
  if (bytes == 0) return;
  DeviceIndexGuard guard(stream.device());
  ONNXTRAIN_CUDA_CHECK(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, native(stream)));
}

void copy_to_host(void* host_dst, const void* device_src, size_t bytes, const DeviceStream& stream) {
  if (bytes == 0) return;
  DeviceIndexGuard guard(stream.device());
  ONNXTRAIN_CUDA_CHECK(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, native(stream)));
}

void copy_on_device(void* dst, const void* src, size_t bytes, const DeviceStream& stream) {
  if (bytes == 0) return;
  DeviceIndexGuard guard(stream.device());
  ONNXTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, native(stream)));
}

// `stream` may belong to either device; the copy is ordered after the work already queued on it (make
// the other device's stream wait on an event for the reverse dependency).
void copy_between_devices(void* dst, int dst_device, const void* src, int src_device, size_t bytes,
                          const DeviceStream& stream) {
  require_device(dst_device, "copy_between_devices (destination)");
  require_device(src_device, "copy_between_devices (source)");
  if (bytes == 0) return;
  if (dst_device == src_device) {
    copy_on_device(dst, src, bytes, stream);
    return;
  }
  // Both directions: the copy engine of either device may drive the transfer.
  enable_peer_access_once(dst_device, src_device);
  enable_peer_access_once(src_device, dst_device);
  DeviceIndexGuard guard(stream.device());
  ONNXTRAIN_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, native(stream)));
}

// --- allocator stats ------------------------------------------------------------------------------------

DeviceAllocatorStats allocator_stats(int device) { return stats_of(device_allocator(device).stats()); }

void empty_cache(int device) { device_allocator(device).empty_cache(); }

}  // namespace onnxtrain::cuda
