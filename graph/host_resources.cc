#include "graph/host_resources.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <limits>
#include <new>
#include <system_error>

#include "graph/error.h"

namespace onnxtrain {

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(size);
}

uint64_t address_space_left_bytes() {
  constexpr uint64_t unlimited = std::numeric_limits<uint64_t>::max();
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return unlimited;
  std::ifstream statm("/proc/self/statm");
  uint64_t mapped_pages = 0;
  if (!(statm >> mapped_pages)) return unlimited;
  const long page = ::sysconf(_SC_PAGE_SIZE);
  const uint64_t mapped = mapped_pages * static_cast<uint64_t>(page > 0 ? page : 4096);
  const uint64_t cap = static_cast<uint64_t>(limit.rlim_cur);
  return mapped >= cap ? 0 : cap - mapped;
}

uint64_t default_thread_stack_bytes() {
  pthread_attr_t attr;
  size_t size = 0;
  if (::pthread_getattr_default_np(&attr) == 0) {
    ::pthread_attr_getstacksize(&attr, &size);
    ::pthread_attr_destroy(&attr);
  }
  return size > 0 ? size : uint64_t{8} << 20;
}

std::string format_memory_size(uint64_t bytes) {
  char text[64];
  if (bytes >= (uint64_t{1} << 30))
    std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 30));
  else if (bytes >= (uint64_t{1} << 20))
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 20));
  else if (bytes >= (uint64_t{1} << 10))
    std::snprintf(text, sizeof text, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  else
    std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
  return text;
}

bool is_out_of_resources(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return true;
  if (const auto* s = dynamic_cast<const std::system_error*>(&e)) {
    return s->code() == std::errc::resource_unavailable_try_again || s->code() == std::errc::not_enough_memory;
  }
  return false;
}

std::optional<std::string> out_of_resources_message(const std::exception& e, const std::string& context) {
  if (!is_out_of_resources(e)) return std::nullopt;
  std::string text = "out of memory";
  if (!context.empty()) text += " " + context;
  if (dynamic_cast<const std::bad_alloc*>(&e))
    text += " (an allocation failed)";
  else
    text += " (cannot start a thread: " + std::string(e.what()) + ")";
  return text + "; this machine's memory or the process's limit (ulimit -v) is too small for this run: make it smaller";
}

void with_out_of_resources_as_error(const std::string& context, const std::function<void()>& f) {
  try {
    f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    if (auto message = out_of_resources_message(e, context)) throw Error(*message);
    throw;
  }
}

void rethrow_with_out_of_resources_as_error(std::exception_ptr e, const std::string& context) {
  with_out_of_resources_as_error(context, [&] { std::rethrow_exception(e); });
  std::rethrow_exception(e);  // not reached: the call above always throws
}

}  // namespace onnxtrain
