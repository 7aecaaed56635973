#include "executor/comm/tcp_comm.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "executor/comm/comm_wire.h"
#include "executor/comm/socket_helpers.h"
#include "executor/comm/tcp_rendezvous.h"

namespace onnxtrain {

using namespace comm_wire;
using Clock = std::chrono::steady_clock;

using namespace socket_helpers;

namespace {

// Every frame on a connection: [FrameHead][body of `length` bytes].
enum FrameType : uint32_t { p2p_frame = 1, collective_frame = 2, abort_frame = 3 };
struct FrameHead {
  uint32_t type = 0;
  uint32_t reserved = 0;
  uint64_t length = 0;
};

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// A frame to write: its own copy of the bytes, or a view of the caller's memory (the collectives, which
// wait until every view has gone out before they return).
struct OutFrame {
  FrameHead head;
  std::shared_ptr<const std::vector<std::byte>> owned;  // null for a view
  const std::byte* data = nullptr;
  std::size_t size = 0;
  std::size_t sent = 0;  // of sizeof(head) + size
};

// A received frame: buffer[0, size) (buffers are reused, so the buffer may be longer).
struct InFrame {
  std::vector<std::byte> buffer;
  std::size_t size = 0;
};

struct Peer {
  int fd = -1;
  bool closed = false;
  std::string closed_why;  // "" for a clean EOF
  std::deque<OutFrame> out;
  // Reading: the frame in progress.
  FrameHead head;
  std::size_t head_got = 0;
  std::vector<std::byte> body;
  std::size_t body_size = 0, body_got = 0;
  // Received, not yet taken.
  std::deque<std::pair<CommTag, Tensor>> unexpected;
  std::deque<InFrame> collective;
};

}  // namespace

struct TcpCommunicator::State {
  int rank = 0, size = 1;
  std::chrono::milliseconds timeout{0};
  // Socket I/O runs on `io` (started once the mesh is up), so that queued frames keep moving while
  // this rank's thread computes; the rank's thread only queues frames and waits on `changed`.
  std::thread io;
  int wake_fd = -1;  // an eventfd that interrupts the I/O thread's poll()
  std::mutex mutex;
  std::condition_variable changed;  // a frame arrived, a peer closed, an abort came
  // Guarded by `mutex` once `io` runs:
  std::vector<Peer> peers;  // peers[rank] is this rank (no socket)
  std::optional<CommAbort> first_abort;
  bool stopping = false;
  Clock::time_point stop_deadline;
  std::size_t views_in_flight = 0;                  // queued frames that view the caller's memory
  std::vector<std::vector<std::byte>> buffer_pool;  // large receive buffers, reused (no page faults)
  // The rank's thread only:
  std::string collectives_broken;  // why the group's collectives are out of step, "" while they are not
  std::vector<float> sum_scratch;

  ~State() {
    if (io.joinable()) {
      {
        std::lock_guard lock(mutex);
        stopping = true;
        stop_deadline = Clock::now() + timeout;
      }
      wake();
      io.join();
    }
    for (Peer& p : peers)
      if (p.fd >= 0) {
        ::shutdown(p.fd, SHUT_WR);
        ::close(p.fd);
      }
    if (wake_fd >= 0) ::close(wake_fd);
  }

  std::string rank_text() const { return "rank " + std::to_string(rank); }

  void wake() {
    if (wake_fd < 0) return;
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t k = ::write(wake_fd, &one, sizeof one);
  }

  // ---- socket I/O (under `mutex`) ------------------------------------------------------------------
  void mark_closed(Peer& p, std::string why) {
    if (p.closed) return;
    p.closed = true;
    p.closed_why = std::move(why);
    for (const OutFrame& f : p.out)
      if (!f.owned) --views_in_flight;
    p.out.clear();
  }

  void flush(Peer& p) {
    while (!p.closed && !p.out.empty()) {
      OutFrame& f = p.out.front();
      const std::size_t total = sizeof f.head + f.size;
      iovec iov[2];
      int n = 0;
      if (f.sent < sizeof f.head) {
        iov[n++] = {reinterpret_cast<char*>(&f.head) + f.sent, sizeof f.head - f.sent};
        if (f.size > 0) iov[n++] = {const_cast<std::byte*>(f.data), f.size};
      } else {
        const std::size_t at = f.sent - sizeof f.head;
        iov[n++] = {const_cast<std::byte*>(f.data) + at, f.size - at};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<std::size_t>(n);
      const ssize_t k = ::sendmsg(p.fd, &msg, MSG_NOSIGNAL);
      if (k < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        mark_closed(p, errno_text(errno));
        return;
      }
      f.sent += static_cast<std::size_t>(k);
      if (f.sent == total) {
        if (!f.owned) --views_in_flight;
        p.out.pop_front();
      }
    }
  }

  // A buffer of at least `size` bytes: the smallest pooled one that fits, else a new one.
  std::vector<std::byte> take_buffer(std::size_t size) {
    constexpr std::size_t pooled = 64 * 1024;
    if (size >= pooled) {
      auto best = buffer_pool.end();
      for (auto it = buffer_pool.begin(); it != buffer_pool.end(); ++it)
        if (it->size() >= size && (best == buffer_pool.end() || it->size() < best->size())) best = it;
      if (best == buffer_pool.end() && !buffer_pool.empty()) best = buffer_pool.begin();  // grow one
      if (best != buffer_pool.end()) {
        std::vector<std::byte> b = std::move(*best);
        buffer_pool.erase(best);
        if (b.size() < size) b.resize(size);
        return b;
      }
    }
    return std::vector<std::byte>(size);
  }

  void recycle(std::vector<std::byte>&& buffer) {
    if (buffer.size() < 64 * 1024) return;
    buffer_pool.push_back(std::move(buffer));
    if (buffer_pool.size() > static_cast<std::size_t>(2 * size + 2))  // drop the smallest
      buffer_pool.erase(std::min_element(buffer_pool.begin(), buffer_pool.end(),
                                         [](const auto& a, const auto& b) { return a.size() < b.size(); }));
  }

  void on_frame(int from, Peer& p) {
    switch (p.head.type) {
      case p2p_frame:
        try {
          p.unexpected.push_back(unpack_message(p.body.data(), p.body_size, from));
        } catch (const Error& e) {
          mark_closed(p, e.what());
        }
        recycle(std::move(p.body));
        break;
      case collective_frame:
        p.collective.push_back(InFrame{std::move(p.body), p.body_size});
        break;
      case abort_frame:
        if (!first_abort)
          first_abort = CommAbort{from, std::string(reinterpret_cast<const char*>(p.body.data()), p.body_size)};
        break;
      default:
        mark_closed(p, "it sent a frame of unknown type " + std::to_string(p.head.type));
    }
    p.body = {};
    p.head_got = p.body_got = p.body_size = 0;
  }

  // Reads what has arrived from p without blocking and dispatches complete frames.
  void drain(int from, Peer& p) {
    while (!p.closed) {
      ssize_t k;
      if (p.head_got < sizeof p.head) {
        k = ::recv(p.fd, reinterpret_cast<char*>(&p.head) + p.head_got, sizeof p.head - p.head_got, 0);
        if (k > 0) {
          p.head_got += static_cast<std::size_t>(k);
          if (p.head_got == sizeof p.head) {
            p.body = take_buffer(p.head.length);
            p.body_size = p.head.length;
            p.body_got = 0;
            if (p.head.length == 0) on_frame(from, p);
          }
          continue;
        }
      } else {
        k = ::recv(p.fd, p.body.data() + p.body_got, p.body_size - p.body_got, 0);
        if (k > 0) {
          p.body_got += static_cast<std::size_t>(k);
          if (p.body_got == p.body_size) on_frame(from, p);
          continue;
        }
      }
      if (k == 0) {
        mark_closed(p, "");
      } else if (errno == EINTR) {
        continue;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        mark_closed(p, errno_text(errno));
      }
      return;
    }
  }

  bool output_pending() const {
    for (const Peer& p : peers)
      if (!p.closed && !p.out.empty()) return true;
    return false;
  }

  // The I/O thread: reads every connection as data arrives, writes queued frames as sockets drain.
  // On `stopping` it finishes writing (until stop_deadline) and exits.
  void io_loop() {
    std::vector<pollfd> fds;
    std::vector<int> fd_peer;
    std::unique_lock lock(mutex);
    for (;;) {
      if (stopping && (!output_pending() || Clock::now() >= stop_deadline)) return;
      fds.assign(1, pollfd{wake_fd, POLLIN, 0});
      fd_peer.assign(1, -1);
      for (int r = 0; r < size; ++r) {
        const Peer& p = peers[static_cast<std::size_t>(r)];
        if (p.fd < 0 || p.closed) continue;
        fds.push_back({p.fd, static_cast<short>(POLLIN | (p.out.empty() ? 0 : POLLOUT)), 0});
        fd_peer.push_back(r);
      }
      const int wait_ms = stopping ? std::max(remaining_ms(stop_deadline), 1) : -1;
      lock.unlock();
      const int ready = ::poll(fds.data(), fds.size(), wait_ms);
      if (fds[0].revents & POLLIN) {
        uint64_t count = 0;
        [[maybe_unused]] const ssize_t k = ::read(wake_fd, &count, sizeof count);
      }
      lock.lock();
      if (ready <= 0) continue;
      const std::size_t views_before = views_in_flight;
      bool news = false;
      for (std::size_t i = 1; i < fds.size(); ++i) {
        Peer& p = peers[static_cast<std::size_t>(fd_peer[i])];
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
          drain(fd_peer[i], p);
          news = true;
        }
        if (fds[i].revents & POLLOUT) flush(p);
      }
      if (news || views_in_flight != views_before) changed.notify_all();
    }
  }

  // Queues a frame (under `mutex`), writes what the socket takes now and leaves the rest to the I/O thread.
  void enqueue(int to, FrameType type, std::shared_ptr<const std::vector<std::byte>> body) {
    Peer& p = peers[static_cast<std::size_t>(to)];
    if (p.closed) return;
    OutFrame f;
    f.head.type = type;
    f.head.length = body->size();
    f.data = body->data();
    f.size = body->size();
    f.owned = std::move(body);
    push(p, std::move(f));
  }

  // Queues a frame of the caller's memory, which must stay unchanged until views_in_flight is 0. Small
  // frames are copied instead: the copy costs less than waiting for the socket to take them.
  void enqueue_view(int to, const void* data, std::size_t size) {
    Peer& p = peers[static_cast<std::size_t>(to)];
    if (p.closed) return;
    if (size < (std::size_t{1} << 20)) {
      const auto* bytes = static_cast<const std::byte*>(data);
      enqueue(to, collective_frame, std::make_shared<const std::vector<std::byte>>(bytes, bytes + size));
      return;
    }
    OutFrame f;
    f.head.type = collective_frame;
    f.head.length = size;
    f.data = static_cast<const std::byte*>(data);
    f.size = size;
    ++views_in_flight;
    push(p, std::move(f));
  }

  void push(Peer& p, OutFrame f) {
    const bool was_idle = p.out.empty();
    p.out.push_back(std::move(f));
    if (was_idle) flush(p);
    if (!p.out.empty()) wake();
  }

  // Turns the queued views into copies (a collective leaving early must not leave its caller's memory
  // queued); the streams stay intact.
  void own_views() {
    for (Peer& p : peers)
      for (OutFrame& f : p.out)
        if (!f.owned) {
          f.owned = std::make_shared<const std::vector<std::byte>>(f.data, f.data + f.size);
          f.data = f.owned->data();
        }
    views_in_flight = 0;
  }

  [[noreturn]] void throw_aborted(const std::string& what, const std::string& doing) const {
    throw Error(what + ": " + rank_text() + " gave up " + doing + ": rank " + std::to_string(first_abort->rank) +
                " aborted" + (first_abort->reason.empty() ? std::string() : ": " + first_abort->reason));
  }

  [[noreturn]] void throw_closed(int peer, const std::string& what, const std::string& doing) const {
    const Peer& p = peers[static_cast<std::size_t>(peer)];
    throw Error(what + ": " + rank_text() + " gave up " + doing + ": rank " + std::to_string(peer) +
                " closed its connection (did it die?)" + (p.closed_why.empty() ? "" : " (" + p.closed_why + ")"));
  }

  // Waits (holding `lock` on `mutex` except while asleep) until ready() holds. Throws when the group is
  // aborted, when blocked() names a closed peer that ready() still needs, or at the deadline
  // (timed_out() builds the message).
  template <typename Ready, typename Blocked, typename TimedOut>
  void wait(std::unique_lock<std::mutex>& lock, Clock::time_point deadline, const std::string& what,
            const std::string& doing, Ready ready, Blocked blocked, TimedOut timed_out) {
    for (;;) {
      if (first_abort) throw_aborted(what, doing);
      if (ready()) return;
      if (const int peer = blocked(); peer >= 0) throw_closed(peer, what, doing);
      if (Clock::now() >= deadline)
        throw Error(what + ": " + rank_text() + " timed out after " + ms_text(timeout) + " " + timed_out());
      changed.wait_until(lock, deadline);
    }
  }

  // ---- collectives ---------------------------------------------------------------------------------
  // Sends this rank's descriptor to every peer and takes theirs; throws unless all agree.
  void start_collective(CollectiveOp op, uint64_t bytes, int root, const std::string& what,
                        Clock::time_point deadline) {
    const std::string doing = std::string("in ") + op_name(op);
    std::unique_lock lock(mutex);
    if (first_abort) throw_aborted(what, doing);
    if (!collectives_broken.empty())
      throw Error(what + ": " + rank_text() + " cannot run " + op_name(op) + ": " + collectives_broken);
    const CollectiveDescriptor mine{static_cast<int32_t>(op), root, bytes};
    auto body = std::make_shared<std::vector<std::byte>>(sizeof mine);
    std::memcpy(body->data(), &mine, sizeof mine);
    for (int r = 0; r < size; ++r)
      if (r != rank) enqueue(r, collective_frame, body);
    std::vector<CollectiveDescriptor> all(static_cast<std::size_t>(size));
    all[static_cast<std::size_t>(rank)] = mine;
    try {
      wait(
          lock, deadline, what, doing, [&] { return missing_collective_frames().empty(); },
          [&] { return closed_without_collective_frame(); },
          [&] { return doing + " waiting for " + ranks_phrase(missing_collective_frames()) + " (did it die?)"; });
    } catch (...) {
      break_collectives(op, what);
      throw;
    }
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      InFrame frame = take_collective_frame(r);
      if (frame.size != sizeof(CollectiveDescriptor))
        throw Error(what + ": " + rank_text() + " " + doing + ": rank " + std::to_string(r) +
                    " sent a malformed collective descriptor");
      std::memcpy(&all[static_cast<std::size_t>(r)], frame.buffer.data(), sizeof(CollectiveDescriptor));
    }
    lock.unlock();
    if (const std::string failure = disagreement(all); !failure.empty())
      throw Error(what + ": " + rank_text() + " " + doing + ": " + failure);
  }

  // Any failure inside a collective's data phase leaves the group's collectives out of step (and must
  // not leave views of the caller's memory queued). Called without `mutex`.
  template <typename Body>
  void guarded(const std::string& what, CollectiveOp op, Body body) {
    try {
      body();
    } catch (...) {
      {
        std::lock_guard lock(mutex);
        own_views();
      }
      break_collectives(op, what);
      throw;
    }
  }

  void break_collectives(CollectiveOp op, const std::string& what) {
    if (collectives_broken.empty())
      collectives_broken = std::string("an earlier ") + op_name(op) + " ('" + what +
                           "') failed on this rank, so the group's collectives are out of step";
  }

  std::vector<int> missing_collective_frames() const {
    std::vector<int> missing;
    for (int r = 0; r < size; ++r)
      if (r != rank && peers[static_cast<std::size_t>(r)].collective.empty()) missing.push_back(r);
    return missing;
  }
  int closed_without_collective_frame() const {
    for (int r : missing_collective_frames())
      if (peers[static_cast<std::size_t>(r)].closed) return r;
    return -1;
  }
  InFrame take_collective_frame(int from) {
    Peer& p = peers[static_cast<std::size_t>(from)];
    InFrame frame = std::move(p.collective.front());
    p.collective.pop_front();
    return frame;
  }

  // The next collective frame from `from`, which must hold `bytes` bytes.
  InFrame collective_frame_from(int from, std::size_t bytes, const std::string& what, const std::string& doing,
                                Clock::time_point deadline) {
    Peer& p = peers[static_cast<std::size_t>(from)];
    std::unique_lock lock(mutex);
    wait(
        lock, deadline, what, doing, [&] { return !p.collective.empty(); }, [&] { return p.closed ? from : -1; },
        [&] { return doing + " waiting for data from rank " + std::to_string(from) + " (did it die?)"; });
    InFrame frame = take_collective_frame(from);
    lock.unlock();
    if (frame.size != bytes)
      throw Error(what + ": " + rank_text() + " " + doing + ": rank " + std::to_string(from) + " sent " +
                  std::to_string(frame.size) + " bytes, expected " + std::to_string(bytes));
    return frame;
  }

  void recycle_frame(InFrame&& frame) {
    std::lock_guard lock(mutex);
    recycle(std::move(frame.buffer));
  }

  // Waits until the socket has taken every view this collective queued.
  void wait_views_sent(const std::string& what, const std::string& doing, Clock::time_point deadline) {
    std::unique_lock lock(mutex);
    wait(
        lock, deadline, what, doing, [&] { return views_in_flight == 0; }, [] { return -1; },
        [&] {
          std::vector<int> slow;
          for (int r = 0; r < size; ++r)
            for (const OutFrame& f : peers[static_cast<std::size_t>(r)].out)
              if (!f.owned) {
                slow.push_back(r);
                break;
              }
          return doing + " waiting for " + ranks_phrase(slow) + " to take this rank's data (did it die?)";
        });
  }

  void all_reduce_sum(std::span<float> data, const std::string& what) {
    const auto deadline = Clock::now() + timeout;
    start_collective(CollectiveOp::all_reduce_sum, data.size_bytes(), 0, what, deadline);
    if (size == 1) return;
    const std::string doing = "in all_reduce_sum";
    guarded(what, CollectiveOp::all_reduce_sum, [&] {
      const Chunks chunks = split(data.size(), size);
      const auto me = static_cast<std::size_t>(rank);
      // Reduce-scatter: chunk j goes to rank j, which adds the ranks' chunks in rank order. The frames
      // view `data`: rank j's chunk region is overwritten below only by rank j's all-gather frame, which
      // rank j sends after it has received all of this rank's chunk.
      {
        std::lock_guard lock(mutex);
        for (int r = 0; r < size; ++r)
          if (r != rank)
            enqueue_view(r, data.data() + chunks.offset[static_cast<std::size_t>(r)],
                         chunks.count[static_cast<std::size_t>(r)] * sizeof(float));
      }
      const std::span<float> mine = data.subspan(chunks.offset[me], chunks.count[me]);
      sum_scratch.resize(mine.size());
      float* acc = sum_scratch.data();
      for (int r = 0; r < size; ++r) {
        InFrame frame;
        const float* x = mine.data();
        if (r != rank) {
          frame = collective_frame_from(r, mine.size_bytes(), what, doing, deadline);
          x = reinterpret_cast<const float*>(frame.buffer.data());
        }
        if (r == 0)
          std::copy(x, x + mine.size(), acc);
        else
          for (std::size_t i = 0; i < mine.size(); ++i) acc[i] += x[i];
        if (r != rank) recycle_frame(std::move(frame));
      }
      std::copy(acc, acc + mine.size(), mine.data());
      // All-gather: every rank's summed chunk to every rank.
      {
        std::lock_guard lock(mutex);
        for (int r = 0; r < size; ++r)
          if (r != rank) enqueue_view(r, mine.data(), mine.size_bytes());
      }
      for (int r = 0; r < size; ++r) {
        if (r == rank) continue;
        const std::span<float> chunk =
            data.subspan(chunks.offset[static_cast<std::size_t>(r)], chunks.count[static_cast<std::size_t>(r)]);
        InFrame frame = collective_frame_from(r, chunk.size_bytes(), what, doing, deadline);
        if (frame.size > 0) std::memcpy(chunk.data(), frame.buffer.data(), frame.size);
        recycle_frame(std::move(frame));
      }
      wait_views_sent(what, doing, deadline);
    });
  }

  void broadcast(std::span<std::byte> data, int root, const std::string& what) {
    const auto deadline = Clock::now() + timeout;
    check_peer(rank, size, root, "broadcast from", what);
    start_collective(CollectiveOp::broadcast, data.size(), root, what, deadline);
    if (size == 1) return;
    guarded(what, CollectiveOp::broadcast, [&] {
      if (rank == root) {
        {
          std::lock_guard lock(mutex);
          for (int r = 0; r < size; ++r)
            if (r != rank) enqueue_view(r, data.data(), data.size());
        }
        wait_views_sent(what, "in broadcast", deadline);
      } else {
        InFrame frame = collective_frame_from(root, data.size(), what, "in broadcast", deadline);
        if (frame.size > 0) std::memcpy(data.data(), frame.buffer.data(), frame.size);
        recycle_frame(std::move(frame));
      }
    });
  }
};

namespace {

// A full mesh holds one socket per other rank, plus the listener, the I/O thread's eventfd and whatever
// else the process has open (model, data, stdio, oneDNN's files). Raises the soft RLIMIT_NOFILE toward the
// hard limit when that is enough; else refuses the world size before any allocation or network wait
// (a WORLD_SIZE of 100000 would otherwise wait out the timeout, or fail accept() in a loop with EMFILE).
void ensure_open_file_limit(int size) {
  constexpr rlim_t headroom = 64;
  const rlim_t needed = static_cast<rlim_t>(size) + headroom;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return;
  if (limit.rlim_max == RLIM_INFINITY || limit.rlim_max >= needed) {
    rlimit raised = limit;
    raised.rlim_cur = needed;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) return;
  }
  throw Error("TCP communicator: world size " + std::to_string(size) +
              " (WORLD_SIZE) is too large for this process: a full mesh of TCP connections needs about " +
              std::to_string(needed) + " open files per process, more than the open-file limit of " +
              std::to_string(limit.rlim_cur) + " (ulimit -n; hard limit " +
              (limit.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(limit.rlim_max)) +
              "); check WORLD_SIZE, or raise the limit");
}

}  // namespace

TcpCommunicator::TcpCommunicator(const TcpRendezvous& rv, std::chrono::milliseconds timeout)
    : state_(std::make_unique<State>()) {
  if (rv.size < 1) throw Error("TCP communicator: world size must be at least 1, got " + std::to_string(rv.size));
  if (rv.rank < 0 || rv.rank >= rv.size)
    throw Error("TCP communicator: rank " + std::to_string(rv.rank) + " is outside 0.." + std::to_string(rv.size - 1));
  if (timeout.count() <= 0)
    throw Error("TCP communicator: timeout must be positive, got " + std::to_string(timeout.count()) + " ms");
  if (rv.size > 1 && (rv.master_port < 1 || rv.master_port > 65535))
    throw Error("TCP communicator: master port must be in 1..65535, got " + std::to_string(rv.master_port));
  if (rv.size > 1) ensure_open_file_limit(rv.size);
  State& s = *state_;
  s.rank = rv.rank;
  s.size = rv.size;
  s.timeout = timeout;
  s.peers.resize(static_cast<std::size_t>(rv.size));
  if (rv.size > 1) {
    const std::vector<int> fds = connect_tcp_mesh(rv, rv.connect_timeout.count() > 0 ? rv.connect_timeout : timeout);
    for (std::size_t r = 0; r < fds.size(); ++r) s.peers[r].fd = fds[r];
  }
  for (Peer& p : s.peers)
    if (p.fd >= 0) {
      set_nonblocking(p.fd);
      set_nodelay(p.fd);
    }
  if (rv.size > 1) {
    s.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s.wake_fd < 0) throw Error("TCP communicator: eventfd() failed: " + errno_text(errno));
    s.io = std::thread([&s] { s.io_loop(); });
  }
}

// ~State delivers what is still queued (the last sends, an abort) before closing, as a process exiting
// after its last send expects, giving up on peers that stop reading for the timeout.
TcpCommunicator::~TcpCommunicator() = default;

int TcpCommunicator::rank() const { return state_->rank; }
int TcpCommunicator::size() const { return state_->size; }

void TcpCommunicator::send(int to, const CommTag& tag, const Tensor& tensor, const std::string& what) {
  State& s = *state_;
  check_peer(s.rank, s.size, to, "send to", what);
  const std::string doing = "sending " + describe(tag) + " to rank " + std::to_string(to);
  if (to == s.rank) {
    Tensor copy = tensor.clone();
    std::lock_guard lock(s.mutex);
    if (s.first_abort) s.throw_aborted(what, doing);
    s.peers[static_cast<std::size_t>(to)].unexpected.emplace_back(tag, std::move(copy));
    return;
  }
  auto body = std::make_shared<const std::vector<std::byte>>(pack_message(tag, tensor));  // outside the lock
  std::lock_guard lock(s.mutex);
  if (s.first_abort) s.throw_aborted(what, doing);
  if (s.peers[static_cast<std::size_t>(to)].closed) s.throw_closed(to, what, doing);
  s.enqueue(to, p2p_frame, std::move(body));
}

Tensor TcpCommunicator::recv(int from, const CommTag& tag, const std::string& what) {
  State& s = *state_;
  check_peer(s.rank, s.size, from, "receive from", what);
  const std::string doing = "receiving " + describe(tag) + " from rank " + std::to_string(from);
  Peer& p = s.peers[static_cast<std::size_t>(from)];
  const auto find = [&] {
    return std::find_if(p.unexpected.begin(), p.unexpected.end(), [&](const auto& m) { return m.first == tag; });
  };
  std::unique_lock lock(s.mutex);
  s.wait(
      lock, Clock::now() + s.timeout, what, doing, [&] { return find() != p.unexpected.end(); },
      [&] { return p.closed ? from : -1; },
      [&] {
        return doing + " (" + std::to_string(p.unexpected.size()) + " other messages from it waiting; rank " +
               std::to_string(from) + " may have died or never sends it)";
      });
  const auto found = find();
  Tensor t = std::move(found->second);
  p.unexpected.erase(found);
  return t;
}

void TcpCommunicator::all_reduce_sum(std::span<float> data, const std::string& what) {
  state_->all_reduce_sum(data, what);
}

void TcpCommunicator::broadcast(std::span<std::byte> data, int root, const std::string& what) {
  state_->broadcast(data, root, what);
}

void TcpCommunicator::barrier(const std::string& what) {
  state_->start_collective(CollectiveOp::barrier, 0, 0, what, Clock::now() + state_->timeout);
}

void TcpCommunicator::abort(const std::string& reason) noexcept {
  State& s = *state_;
  try {
    std::lock_guard lock(s.mutex);
    if (s.first_abort) return;
    s.first_abort = CommAbort{s.rank, clip_reason(reason)};
    const std::string& text = s.first_abort->reason;
    const auto* bytes = reinterpret_cast<const std::byte*>(text.data());
    auto body = std::make_shared<const std::vector<std::byte>>(bytes, bytes + text.size());
    for (int r = 0; r < s.size; ++r)
      if (r != s.rank) s.enqueue(r, abort_frame, body);
  } catch (...) {  // out of memory: the local abort holds if it was recorded
  }
}

std::optional<CommAbort> TcpCommunicator::aborted() const {
  std::lock_guard lock(state_->mutex);
  return state_->first_abort;
}

}  // namespace onnxtrain
