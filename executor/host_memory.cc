#include "executor/host_memory.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

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

}  // namespace onnxtrain
