#include "executor/comm/tcp_rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "executor/comm/comm_wire.h"
#include "executor/comm/socket_helpers.h"

namespace onnxtrain {

using namespace comm_wire;
using Clock = std::chrono::steady_clock;

using namespace socket_helpers;

namespace {

constexpr uint32_t kHelloMagic = 0x4f54524eu;  // "OTRN"
struct Hello {
  uint32_t magic = kHelloMagic;
  int32_t rank = 0;
  int32_t size = 0;
  int32_t port = 0;  // the rank's own listening port (to rank 0 only)
};
struct TableEntry {
  uint32_t addr = 0;  // network byte order
  int32_t port = 0;
};

// A listening socket on all interfaces; port 0 picks a free one. Returns the fd and the port.
std::pair<int, int> listen_on(int port, const std::string& context) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(context + ": socket() failed: " + errno_text(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 1024) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(context + ": cannot listen on port " + std::to_string(port) + ": " + errno_text(e));
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  set_nonblocking(fd);
  return {fd, ntohs(addr.sin_port)};
}

uint32_t resolve_ipv4(const std::string& host, const std::string& context) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr)
    throw Error(context + ": cannot resolve MASTER_ADDR '" + host + "': " + ::gai_strerror(rc));
  const uint32_t addr = reinterpret_cast<sockaddr_in*>(result->ai_addr)->sin_addr.s_addr;
  ::freeaddrinfo(result);
  return addr;
}

std::string ipv4_text(uint32_t addr) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr, text, sizeof text);
  return text;
}

// Connects to addr:port, retrying while nobody listens yet, until `deadline`. Returns -1 (and the last
// error in `why`) when it could not.
int connect_until(uint32_t addr, int port, Clock::time_point deadline, std::string& why) {
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = "socket() failed: " + errno_text(errno);
      return -1;
    }
    set_nonblocking(fd);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = addr;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    int err = 0;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        const int ready = ::poll(&p, 1, std::max(remaining_ms(deadline), 1));
        socklen_t len = sizeof err;
        if (ready == 1)
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        else
          err = ETIMEDOUT;
      }
    }
    if (err == 0) return fd;
    ::close(fd);
    why = errno_text(err);
    if (Clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // rank 0 (or the peer) not listening yet
  }
}

// Reads or writes exactly n bytes on a non-blocking socket before `deadline`; false on timeout or EOF.
bool transfer_exact(int fd, void* data, std::size_t n, bool write, Clock::time_point deadline, std::string& why) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= static_cast<std::size_t>(k);
      continue;
    }
    if (k == 0) {
      why = "the connection closed";
      return false;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      why = errno_text(errno);
      return false;
    }
    pollfd pf{fd, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    const int left = remaining_ms(deadline);
    if (left == 0 || ::poll(&pf, 1, left) == 0) {
      why = "timed out";
      return false;
    }
  }
  return true;
}

// One rank's side of the rendezvous; fds[r] collects the connection to rank r.
struct Mesh {
  int rank = 0, size = 1;
  std::vector<int> fds;

  void connect(const TcpRendezvous& rv, std::chrono::milliseconds connect_timeout) {
    const auto deadline = Clock::now() + connect_timeout;
    const std::string context = "TCP rendezvous of rank " + std::to_string(rank) + " of " + std::to_string(size) +
                                " at " + rv.master_addr + ":" + std::to_string(rv.master_port);
    std::string why;
    if (rank == 0) {
      const auto [listener, port] = listen_on(rv.master_port, context);
      try {
        accept_peers(listener, 1, deadline, connect_timeout, context, /*with_port_table=*/true);
      } catch (...) {
        ::close(listener);
        throw;
      }
      ::close(listener);
      return;
    }
    const auto [listener, my_port] = listen_on(0, context);
    try {
      const uint32_t master = resolve_ipv4(rv.master_addr, context);
      const int fd = connect_until(master, rv.master_port, deadline, why);
      if (fd < 0)
        throw Error(context + ": cannot reach rank 0 within " + ms_text(connect_timeout) + " (" + why +
                    "); is rank 0 running, and are MASTER_ADDR and MASTER_PORT right?");
      fds[0] = fd;
      Hello hello{kHelloMagic, rank, size, my_port};
      std::vector<TableEntry> table(static_cast<std::size_t>(size));
      if (!transfer_exact(fd, &hello, sizeof hello, true, deadline, why) ||
          !transfer_exact(fd, table.data(), table.size() * sizeof(TableEntry), false, deadline, why))
        throw Error(context + ": rank 0 did not send the table of ranks within " + ms_text(connect_timeout) + " (" +
                    why + "); are all " + std::to_string(size) + " ranks running?");
      for (int q = 1; q < rank; ++q) {
        const TableEntry& e = table[static_cast<std::size_t>(q)];
        const int peer = connect_until(e.addr, e.port, deadline, why);
        if (peer < 0)
          throw Error(context + ": cannot connect to rank " + std::to_string(q) + " at " + ipv4_text(e.addr) + ":" +
                      std::to_string(e.port) + " (" + why + ")");
        fds[static_cast<std::size_t>(q)] = peer;
        Hello h{kHelloMagic, rank, size, 0};
        if (!transfer_exact(peer, &h, sizeof h, true, deadline, why))
          throw Error(context + ": cannot greet rank " + std::to_string(q) + " (" + why + ")");
      }
      accept_peers(listener, rank + 1, deadline, connect_timeout, context, /*with_port_table=*/false);
    } catch (...) {
      ::close(listener);
      throw;
    }
    ::close(listener);
  }

  // Accepts ranks first..size-1 on `listener`. Rank 0 (with_port_table) then sends every rank the table.
  void accept_peers(int listener, int first, Clock::time_point deadline, std::chrono::milliseconds connect_timeout,
                    const std::string& context, bool with_port_table) {
    std::vector<TableEntry> table(static_cast<std::size_t>(size));
    const auto missing = [&] {
      std::vector<int> m;
      for (int r = first; r < size; ++r)
        if (fds[static_cast<std::size_t>(r)] < 0) m.push_back(r);
      return m;
    };
    std::string why;
    int waiting = 0;  // ranks first..size-1 not connected yet (missing() builds the list only for the error)
    for (int r = first; r < size; ++r)
      if (fds[static_cast<std::size_t>(r)] < 0) ++waiting;
    while (waiting > 0) {
      pollfd p{listener, POLLIN, 0};
      const int left = remaining_ms(deadline);
      if (left == 0 || ::poll(&p, 1, left) <= 0)
        throw Error(context + ": rank " + std::to_string(rank) + " timed out after " + ms_text(connect_timeout) +
                    " waiting for " + ranks_phrase(missing()) + " to connect; are they running, with WORLD_SIZE " +
                    std::to_string(size) + "?");
      sockaddr_in addr{};
      socklen_t len = sizeof addr;
      const int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        const int e = errno;
        if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM)  // would fail again at once, until the deadline
          throw Error(context + ": rank " + std::to_string(rank) +
                      " cannot accept another connection: " + errno_text(e) + " (WORLD_SIZE " + std::to_string(size) +
                      " needs one open file per rank; see ulimit -n)");
        continue;
      }
      Hello hello;
      if (!transfer_exact(fd, &hello, sizeof hello, false, deadline, why) || hello.magic != kHelloMagic) {
        ::close(fd);  // not one of ours (or it gave up): keep listening
        continue;
      }
      if (hello.size != size || hello.rank < first || hello.rank >= size ||
          fds[static_cast<std::size_t>(hello.rank)] >= 0) {
        ::close(fd);
        throw Error(context + ": a process claiming rank " + std::to_string(hello.rank) + " of " +
                    std::to_string(hello.size) + " connected to rank " + std::to_string(rank) +
                    " (expected one of ranks " + std::to_string(first) + ".." + std::to_string(size - 1) + " of " +
                    std::to_string(size) + ", each once); check RANK and WORLD_SIZE of every process");
      }
      fds[static_cast<std::size_t>(hello.rank)] = fd;
      table[static_cast<std::size_t>(hello.rank)] = TableEntry{addr.sin_addr.s_addr, hello.port};
      --waiting;
    }
    if (with_port_table)
      for (int r = 1; r < size; ++r)
        if (!transfer_exact(fds[static_cast<std::size_t>(r)], table.data(), table.size() * sizeof(TableEntry), true,
                            deadline, why))
          throw Error(context + ": cannot send the table of ranks to rank " + std::to_string(r) + " (" + why + ")");
  }
};

}  // namespace

std::vector<int> connect_tcp_mesh(const TcpRendezvous& rv, std::chrono::milliseconds connect_timeout) {
  Mesh mesh{rv.rank, rv.size, std::vector<int>(static_cast<std::size_t>(rv.size), -1)};
  try {
    mesh.connect(rv, connect_timeout);
  } catch (...) {
    for (int fd : mesh.fds)
      if (fd >= 0) ::close(fd);
    throw;
  }
  return mesh.fds;
}

}  // namespace onnxtrain
