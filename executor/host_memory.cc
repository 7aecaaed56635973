#include "executor/host_memory.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kernels/caching_allocator.h"

extern char** environ;

namespace onnxtrain {
namespace {

bool user_tunes_malloc() {
  for (char** e = environ; e && *e; ++e) {
    const char* v = *e;
    if (std::strncmp(v, "GLIBC_TUNABLES=", 15) == 0) return true;
    if (std::strncmp(v, "MALLOC_", 7) == 0) {
      const char* eq = std::strchr(v, '=');
      if (eq && eq - v > 8 && eq[-1] == '_') return true;  // glibc's spelling: MALLOC_TRIM_THRESHOLD_=...
    }
  }
  return false;
}

}  // namespace

void retain_freed_host_memory() {
  static std::once_flag once;
  std::call_once(once, [] {
#if defined(__GLIBC__) && defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
    if (user_tunes_malloc()) return;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  });
}

Tensor recycled_host_tensor(DType dtype, std::vector<int64_t> sizes) {
  const size_t bytes = static_cast<size_t>(TensorDesc{dtype, sizes}.numel()) * dtype_size(dtype);
  if (bytes == 0) return Tensor(dtype, std::move(sizes));
  // Never destroyed: tensors may outlive every other static object.
  static auto* pool = new CachingAllocator(
      "host batches", AllocatorBackend{.allocate = [](size_t n) { return std::aligned_alloc(64, (n + 63) / 64 * 64); },
                                       .release = [](void* p) { std::free(p); }});
  auto* block = static_cast<std::byte*>(pool->allocate(bytes, nullptr));
  return Tensor::wrap(dtype, std::move(sizes), std::shared_ptr<std::byte>(block, [](std::byte* p) { pool->free(p); }));
}

}  // namespace onnxtrain
