// Runs a piece of a test in a forked child, so that it may lower its own limits (RLIMIT_AS, RLIMIT_FSIZE,
// RLIMIT_NOFILE) or crash without taking the test binary with it.
//
//   ChildResult r = run_in_child([] {
//     limit_file_size(100);                      // writes past 100 bytes fail with EFBIG (SIGXFSZ ignored)
//     return error_of([] { write_npy(path, big); });
//   });
//   EXPECT_TRUE(r.exited) << r.describe();       // false: the child was killed (std::terminate, abort)
//   EXPECT_NE(r.message.find("write failed: File too large"), std::string::npos);
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <string>

namespace onnxtrain::testing_support {

struct ChildResult {
  bool exited = false;  // exited normally (did not abort or die of a signal)
  int signal = 0;       // the signal that killed it, 0 if none
  std::string message;  // what the body returned (or the text of an exception it let escape)
  std::string describe() const {
    return exited ? "child exited; message: " + message
                  : "child killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  }
};

// Forks; the child runs `body` and sends back the string it returns. Exceptions escaping `body` are sent
// back as "uncaught: WHAT".
inline ChildResult run_in_child(const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return {.message = "pipe() failed"};
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string text;
    try {
      text = body();
    } catch (const std::exception& e) {
      text = std::string("uncaught: ") + e.what();
    }
    const char* p = text.data();
    size_t left = text.size();
    while (left > 0) {
      const ssize_t w = ::write(fds[1], p, left);
      if (w <= 0) break;
      p += w;
      left -= static_cast<size_t>(w);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  ChildResult result;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;)
    result.message.append(buffer, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exited = WIFEXITED(status);
  result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return result;
}

// In the child: files may not grow past `bytes`; a write past it fails with EFBIG instead of SIGXFSZ.
inline void limit_file_size(rlim_t bytes) {
  ::signal(SIGXFSZ, SIG_IGN);
  const rlimit limit{bytes, bytes};
  ::setrlimit(RLIMIT_FSIZE, &limit);
}

// In the child: the address space may grow by about `bytes` more than it has mapped now.
inline void limit_address_space_growth(rlim_t bytes) {
  std::ifstream statm("/proc/self/statm");
  rlim_t pages = 0;
  statm >> pages;
  const rlim_t cap = pages * static_cast<rlim_t>(::sysconf(_SC_PAGE_SIZE)) + bytes;
  const rlimit limit{cap, cap};
  ::setrlimit(RLIMIT_AS, &limit);
}

// Built with AddressSanitizer or ThreadSanitizer: their runtimes reserve terabytes of address space and
// do not survive an RLIMIT_AS that makes mmap fail.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ONNXTRAIN_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ONNXTRAIN_TEST_SANITIZED 1
#endif
#endif
#ifdef ONNXTRAIN_TEST_SANITIZED
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

}  // namespace onnxtrain::testing_support
