// A loopback TCP port nobody listens on now: the kernel's pick for port 0, closed again at once, for a
// rendezvous the test starts next. Ports derived from the process id collided with ports other tests or
// processes held ("cannot listen on port 33860: Address already in use", a CI run of 2026-12-06).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace onnxtrain::testing_support {

inline int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("free_loopback_port: no socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!bound) throw std::runtime_error("free_loopback_port: cannot bind a loopback port");
  return ntohs(addr.sin_port);
}

}  // namespace onnxtrain::testing_support
