// Small POSIX socket helpers shared by the TCP transport (tcp_comm.cc) and its rendezvous
// (tcp_rendezvous.cc).
#pragma once

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

namespace onnxtrain::socket_helpers {

inline std::string errno_text(int e) { return std::strerror(e); }

inline void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

// Milliseconds until `deadline` for poll(): 0 once it has passed, capped to fit an int.
inline int remaining_ms(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

}  // namespace onnxtrain::socket_helpers
