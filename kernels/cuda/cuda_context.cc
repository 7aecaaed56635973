// What CUDA kernels get from their Stream (kernels/cuda/cuda_context.h): the device guard, cuBLAS and
// cuDNN handles per (device, host thread) bound to the stream on every call, and per-(device, stream)
// scratch workspaces from the device's caching allocator.
#include "kernels/cuda/cuda_context.h"

#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "graph/error.h"
#include "kernels/cuda/cuda_runtime.h"
#include "kernels/cuda/cuda_runtime_internal.h"
#include "kernels/cuda/math_mode.h"

namespace onnxtrain::cuda {
namespace {

// cuBLAS's own default workspace size on Hopper. It is kept per stream (below) rather than left to the
// handle's default pool, so two streams driven from one thread (one handle) never share cuBLAS scratch
// while their kernels overlap.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

// A block of the device's caching allocator owned by one (device, stream) pair. Its stream key is that
// stream, so when a block is dropped to make room for a larger one, the only allocations that can take
// it are later ones on the same stream, queued after every kernel that used it: growing never needs a
// host synchronisation.
struct StreamBlock {
  void* ptr = nullptr;
  size_t bytes = 0;
};

struct StreamWorkspaces {
  StreamBlock scratch;  // workspace()
  StreamBlock padding;  // padding_workspace()
  StreamBlock cublas;   // cublasSetWorkspace
};

struct WorkspaceRegistry {
  std::mutex mutex;
  std::map<std::pair<int, const void*>, StreamWorkspaces> by_stream;
};

// Never destroyed, like the allocators the blocks belong to (CUDA may be torn down before static
// destructors run).
WorkspaceRegistry& registry() {
  static auto* r = new WorkspaceRegistry();
  return *r;
}

void* grow(StreamBlock& block, int device, const void* stream, size_t bytes) {
  if (block.ptr == nullptr || block.bytes < bytes) {
    CachingAllocator& allocator = detail::device_allocator(device);
    if (block.ptr != nullptr) allocator.free(block.ptr);
    block = StreamBlock{};  // stays empty if the allocation below throws
    block.ptr = allocator.allocate(bytes, stream);
    block.bytes = bytes;
  }
  return block.ptr;
}

void* stream_block(const Stream& stream, size_t bytes, StreamBlock StreamWorkspaces::*which) {
  WorkspaceRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  StreamWorkspaces& ws = r.by_stream[{stream.device_index(), stream.native_handle()}];
  return grow(ws.*which, stream.device_index(), stream.native_handle(), bytes);
}

// The calling thread's handles, one per device, destroyed when the thread exits. A cuBLAS or cuDNN
// handle must not be used by two host threads at once, hence per thread; binding it to the caller's
// stream on every call lets one handle serve every stream of its thread.
struct ThreadHandles {
  std::unordered_map<int, cublasHandle_t> cublas;
#if ONNXTRAIN_HAVE_CUDNN
  std::unordered_map<int, cudnnHandle_t> cudnn;
#endif
  ThreadHandles() = default;
  ThreadHandles(const ThreadHandles&) = delete;
  ThreadHandles& operator=(const ThreadHandles&) = delete;
  ~ThreadHandles() {
    // Errors are ignored: a destructor must not throw, and at exit the driver may be shutting down.
    for (auto& [device, handle] : cublas) (void)cublasDestroy(handle);
#if ONNXTRAIN_HAVE_CUDNN
    for (auto& [device, handle] : cudnn) (void)cudnnDestroy(handle);
#endif
  }
};

ThreadHandles& thread_handles() {
  thread_local ThreadHandles handles;
  return handles;
}

void require_cuda_stream(const Stream& stream, const char* what) {
  if (stream.device() != DeviceKind::Cuda) {
    throw Error(std::string(what) + " needs a CUDA stream, got a " + std::string(device_kind_name(stream.device())) +
                " stream");
  }
  require_device(stream.device_index(), what);
}

}  // namespace

void detail::release_stream_workspaces(int device, const void* stream) {
  WorkspaceRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.by_stream.find({device, stream});
  if (it == r.by_stream.end()) return;
  CachingAllocator& allocator = detail::device_allocator(device);
  for (StreamBlock* block : {&it->second.scratch, &it->second.padding, &it->second.cublas}) {
    if (block->ptr != nullptr) allocator.free(block->ptr);
  }
  r.by_stream.erase(it);
}

DeviceGuard::DeviceGuard(const Stream& stream) {
  require_cuda_stream(stream, "DeviceGuard");
  ONNXTRAIN_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != stream.device_index()) ONNXTRAIN_CUDA_CHECK(cudaSetDevice(stream.device_index()));
}

// Unconditional: setting the device that is already current costs next to nothing.
DeviceGuard::~DeviceGuard() { (void)cudaSetDevice(previous_); }

cublasHandle_t cublas_handle(const Stream& stream) {
  DeviceGuard guard(stream);  // a handle belongs to the device current when it is created
  cublasHandle_t& handle = thread_handles().cublas[stream.device_index()];
  if (handle == nullptr) {
    cublasHandle_t created = nullptr;
    ONNXTRAIN_CUBLAS_CHECK(cublasCreate(&created));
    handle = created;
  }
  ONNXTRAIN_CUBLAS_CHECK(cublasSetStream(handle, native_stream(stream)));
  // After cublasSetStream, which resets the handle to its default workspace pool.
  void* ws = stream_block(stream, kCublasWorkspaceBytes, &StreamWorkspaces::cublas);
  ONNXTRAIN_CUBLAS_CHECK(cublasSetWorkspace(handle, ws, kCublasWorkspaceBytes));
  // DEFAULT math computes float32 products in float32; TF32 tensor cores only when --tf32 allows them.
  ONNXTRAIN_CUBLAS_CHECK(cublasSetMathMode(handle, allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  return handle;
}

#if ONNXTRAIN_HAVE_CUDNN
cudnnHandle_t cudnn_handle(const Stream& stream) {
  DeviceGuard guard(stream);
  cudnnHandle_t& handle = thread_handles().cudnn[stream.device_index()];
  if (handle == nullptr) {
    cudnnHandle_t created = nullptr;
    ONNXTRAIN_CUDNN_CHECK(cudnnCreate(&created));
    handle = created;
  }
  ONNXTRAIN_CUDNN_CHECK(cudnnSetStream(handle, native_stream(stream)));
  return handle;
}
#endif

// Valid until the next workspace() call on the same stream: a larger request replaces the block (the
// old one goes back to the stream's cache, stream-ordered), a smaller one returns the same block.
void* workspace(const Stream& stream, size_t bytes) {
  require_cuda_stream(stream, "workspace");
  return stream_block(stream, bytes, &StreamWorkspaces::scratch);
}

void* padding_workspace(const Stream& stream, size_t bytes) {
  require_cuda_stream(stream, "padding_workspace");
  return stream_block(stream, bytes, &StreamWorkspaces::padding);
}

}  // namespace onnxtrain::cuda
