#include "executor/comm/mpi_comm.h"

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

#include "executor/comm/comm_wire.h"

namespace onnxtrain {

using namespace comm_wire;
using Clock = std::chrono::steady_clock;

namespace {

// Point-to-point messages, collective descriptors and abort notices travel on their own MPI tags; the
// data of collectives uses MPI's collectives (a separate matching space).
constexpr int kMessageTag = 1;
constexpr int kDescriptorTag = 2;
constexpr int kAbortTag = 3;

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<std::size_t>(length));
}

void check(int rc, const char* call, const std::string& context) {
  if (rc != MPI_SUCCESS) throw Error(context + ": " + call + " failed: " + mpi_error_text(rc));
}

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

void finalize_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void ensure_mpi_initialized() {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) throw Error("MPI communicator: MPI has already been finalised in this process");
  if (initialized) return;  // the application's own MPI_Init; it finalises too
  if (!env_set("OMPI_COMM_WORLD_SIZE") && !env_set("PMIX_RANK") && !env_set("PMI_RANK"))
    throw Error(
        "MPI communicator: this process was not started by mpirun (none of OMPI_COMM_WORLD_SIZE, PMIX_RANK, "
        "PMI_RANK is set); start it with `mpirun -np N ...`, or use torchrun-style variables for the TCP "
        "backend");
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread", "MPI communicator");
  std::atexit(finalize_mpi);
  if (provided < MPI_THREAD_SERIALIZED)
    throw Error("MPI communicator: this MPI library provides thread level " + std::to_string(provided) +
                ", below MPI_THREAD_SERIALIZED");
}

// Pauses between polls: spin first (the answer is usually microseconds away), then yield, then sleep
// so that oversubscribed ranks leave the cores to the ranks that have work.
void back_off(Clock::time_point since) {
  const auto waited = Clock::now() - since;
  if (waited < std::chrono::microseconds(200)) return;
  if (waited < std::chrono::milliseconds(2))
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(100));
}

}  // namespace

struct MpiCommunicator::State {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::chrono::milliseconds timeout{0};
  // Posted sends and the buffers they read (parallel arrays; completed ones are reaped on later calls).
  std::vector<MPI_Request> send_requests;
  std::vector<std::vector<std::byte>> send_buffers;
  // Per peer: received messages not yet asked for, and the message being received now.
  std::vector<std::deque<std::pair<CommTag, Tensor>>> unexpected;
  std::vector<MPI_Request> incoming;
  std::vector<std::vector<std::byte>> incoming_buffer;
  std::optional<CommAbort> first_abort;
  std::string collectives_broken;
  std::vector<float> scratch;

  std::string rank_text() const { return "rank " + std::to_string(rank); }
  std::string context(const std::string& what) const { return what + ": " + rank_text(); }

  void post_send(std::vector<std::byte> buffer, int to, int tag, const std::string& what) {
    if (buffer.size() > static_cast<std::size_t>(INT_MAX))
      throw Error(context(what) + " cannot send " + std::to_string(buffer.size()) +
                  " bytes in one MPI message (at most 2 GiB - 1)");
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, to, tag, comm, &request), "MPI_Isend",
          context(what));
    send_requests.push_back(request);
    send_buffers.push_back(std::move(buffer));
  }

  void reap_sends() {
    if (send_requests.empty()) return;
    int completed = 0;
    std::vector<int> indices(send_requests.size());
    if (MPI_Testsome(static_cast<int>(send_requests.size()), send_requests.data(), &completed, indices.data(),
                     MPI_STATUSES_IGNORE) != MPI_SUCCESS ||
        completed <= 0)
      return;  // a failed send surfaces as its receiver's timeout
    std::size_t kept = 0;
    for (std::size_t i = 0; i < send_requests.size(); ++i)
      if (send_requests[i] != MPI_REQUEST_NULL) {
        if (kept != i) {  // a vector moved onto itself is emptied: that would free a buffer MPI still reads
          send_requests[kept] = send_requests[i];
          send_buffers[kept] = std::move(send_buffers[i]);
        }
        ++kept;
      }
    send_requests.resize(kept);
    send_buffers.resize(kept);
  }

  // Takes every abort notice that has arrived; the first one (unless this rank aborted first) is kept.
  void poll_abort() {
    for (;;) {
      int flag = 0;
      MPI_Message message;
      MPI_Status status;
      if (MPI_Improbe(MPI_ANY_SOURCE, kAbortTag, comm, &flag, &message, &status) != MPI_SUCCESS || !flag) return;
      int count = 0;
      MPI_Get_count(&status, MPI_CHAR, &count);
      std::string reason(static_cast<std::size_t>(std::max(count, 0)), '\0');
      // Abort notices are small (clip_reason), so MPI sends them eagerly: this receive does not wait.
      MPI_Mrecv(reason.data(), count, MPI_CHAR, &message, MPI_STATUS_IGNORE);
      if (!first_abort) first_abort = CommAbort{status.MPI_SOURCE, std::move(reason)};
    }
  }

  [[noreturn]] void throw_aborted(const std::string& what, const std::string& doing) const {
    throw Error(context(what) + " gave up " + doing + ": rank " + std::to_string(first_abort->rank) + " aborted" +
                (first_abort->reason.empty() ? std::string() : ": " + first_abort->reason));
  }

  // Polls ready() until it holds. Throws at the deadline (timed_out() says what was missing) and, when
  // `abortable`, as soon as an abort notice arrives.
  template <typename Ready, typename TimedOut>
  void wait(Clock::time_point deadline, const std::string& what, const std::string& doing, bool abortable, Ready ready,
            TimedOut timed_out) {
    const auto since = Clock::now();
    for (;;) {
      poll_abort();
      if (abortable && first_abort) throw_aborted(what, doing);
      if (ready()) return;
      if (Clock::now() >= deadline)
        throw Error(context(what) + " timed out after " + ms_text(timeout) + " " + timed_out());
      reap_sends();
      back_off(since);
    }
  }

  // Receives, in arrival order, the messages from `from` that have arrived (MPI keeps their order).
  void pump(int from, const std::string& what) {
    const auto f = static_cast<std::size_t>(from);
    for (;;) {
      if (incoming[f] != MPI_REQUEST_NULL) {
        int done = 0;
        check(MPI_Test(&incoming[f], &done, MPI_STATUS_IGNORE), "MPI_Test", context(what));
        if (!done) return;
        std::vector<std::byte> buffer = std::move(incoming_buffer[f]);
        incoming_buffer[f] = {};
        unexpected[f].push_back(unpack_message(buffer.data(), buffer.size(), from));
      }
      int flag = 0;
      MPI_Message message;
      MPI_Status status;
      check(MPI_Improbe(from, kMessageTag, comm, &flag, &message, &status), "MPI_Improbe", context(what));
      if (!flag) return;
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      incoming_buffer[f].resize(static_cast<std::size_t>(count));
      check(MPI_Imrecv(incoming_buffer[f].data(), count, MPI_BYTE, &message, &incoming[f]), "MPI_Imrecv",
            context(what));
    }
  }

  // Exchanges descriptors with every rank; throws unless all agree.
  void start_collective(CollectiveOp op, uint64_t bytes, int root, const std::string& what,
                        Clock::time_point deadline) {
    const std::string doing = std::string("in ") + op_name(op);
    poll_abort();
    if (first_abort) throw_aborted(what, doing);
    if (!collectives_broken.empty())
      throw Error(context(what) + " cannot run " + op_name(op) + ": " + collectives_broken);
    std::vector<CollectiveDescriptor> all(static_cast<std::size_t>(size));
    all[static_cast<std::size_t>(rank)] = CollectiveDescriptor{static_cast<int32_t>(op), root, bytes};
    std::vector<MPI_Request> requests(static_cast<std::size_t>(size), MPI_REQUEST_NULL);
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      check(MPI_Irecv(&all[static_cast<std::size_t>(r)], sizeof(CollectiveDescriptor), MPI_BYTE, r, kDescriptorTag,
                      comm, &requests[static_cast<std::size_t>(r)]),
            "MPI_Irecv", context(what));
      std::vector<std::byte> mine(sizeof(CollectiveDescriptor));
      std::memcpy(mine.data(), &all[static_cast<std::size_t>(rank)], mine.size());
      post_send(std::move(mine), r, kDescriptorTag, what);
    }
    const auto missing = [&] {
      std::vector<int> m;
      for (int r = 0; r < size; ++r)
        if (requests[static_cast<std::size_t>(r)] != MPI_REQUEST_NULL) m.push_back(r);
      return m;
    };
    try {
      wait(
          deadline, what, doing, /*abortable=*/true,
          [&] {
            int completed = 0;
            std::vector<int> indices(requests.size());
            check(MPI_Testsome(size, requests.data(), &completed, indices.data(), MPI_STATUSES_IGNORE), "MPI_Testsome",
                  context(what));
            return missing().empty();
          },
          [&] { return doing + " waiting for " + ranks_phrase(missing()) + " (did it die?)"; });
    } catch (...) {
      // Withdraw the receives so that nothing writes into `all` later; a descriptor that matched
      // meanwhile completes them normally.
      for (MPI_Request& r : requests)
        if (r != MPI_REQUEST_NULL) {
          MPI_Cancel(&r);
          MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
      break_collectives(op, what);
      throw;
    }
    if (const std::string failure = disagreement(all); !failure.empty())
      throw Error(context(what) + " " + doing + ": " + failure);
  }

  void break_collectives(CollectiveOp op, const std::string& what) {
    if (collectives_broken.empty())
      collectives_broken = std::string("an earlier ") + op_name(op) + " ('" + what +
                           "') failed on this rank, so the group's collectives are out of step";
  }

  // Waits for a collective's data phase. Every rank has entered the collective (descriptors came from
  // all), so it completes unless a rank died: an abort notice arriving meanwhile is taken (the next call
  // throws) but does not abandon the request, whose buffers are the caller's.
  void finish(MPI_Request& request, CollectiveOp op, const char* call, const std::string& what,
              Clock::time_point deadline) {
    const std::string doing = std::string("in ") + op_name(op) + " (" + call + ")";
    try {
      wait(
          deadline, what, doing, /*abortable=*/false,
          [&] {
            int done = 0;
            check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test", context(what) + " " + doing);
            return done != 0;
          },
          [&] { return doing + " with every other rank; one of them may have died"; });
    } catch (...) {
      break_collectives(op, what);
      throw;
    }
  }

  void all_reduce_sum(std::span<float> data, const std::string& what) {
    const auto deadline = Clock::now() + timeout;
    start_collective(CollectiveOp::all_reduce_sum, data.size_bytes(), 0, what, deadline);
    if (size == 1) return;
    // Segments keep MPI's int counts in range and the scratch buffer bounded.
    constexpr std::size_t segment = std::size_t{1} << 26;
    const auto p = static_cast<std::size_t>(size), me = static_cast<std::size_t>(rank);
    std::vector<int> send_counts(p), send_offsets(p), recv_counts(p), recv_offsets(p);
    for (std::size_t begin = 0; begin < data.size(); begin += segment) {
      const std::span<float> part = data.subspan(begin, std::min(segment, data.size() - begin));
      const Chunks chunks = split(part.size(), size);
      const std::size_t mine = chunks.count[me];
      for (std::size_t j = 0; j < p; ++j) {
        send_counts[j] = static_cast<int>(chunks.count[j]);
        send_offsets[j] = static_cast<int>(chunks.offset[j]);
        recv_counts[j] = static_cast<int>(mine);
        recv_offsets[j] = static_cast<int>(j * mine);
      }
      scratch.resize(p * mine);
      MPI_Request request = MPI_REQUEST_NULL;
      // Reduce-scatter: rank j receives every rank's chunk j, in rank order in `scratch`.
      check(MPI_Ialltoallv(part.data(), send_counts.data(), send_offsets.data(), MPI_FLOAT, scratch.data(),
                           recv_counts.data(), recv_offsets.data(), MPI_FLOAT, comm, &request),
            "MPI_Ialltoallv", context(what));
      finish(request, CollectiveOp::all_reduce_sum, "MPI_Ialltoallv", what, deadline);
      float* sum = part.data() + chunks.offset[me];
      std::copy(scratch.data(), scratch.data() + mine, sum);
      for (std::size_t r = 1; r < p; ++r) {
        const float* x = scratch.data() + r * mine;
        for (std::size_t i = 0; i < mine; ++i) sum[i] += x[i];
      }
      check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, part.data(), send_counts.data(), send_offsets.data(),
                            MPI_FLOAT, comm, &request),
            "MPI_Iallgatherv", context(what));
      finish(request, CollectiveOp::all_reduce_sum, "MPI_Iallgatherv", what, deadline);
    }
    if (scratch.capacity() > (std::size_t{1} << 24)) scratch = {};  // do not hold on to 64 MiB between steps
  }

  void broadcast(std::span<std::byte> data, int root, const std::string& what) {
    const auto deadline = Clock::now() + timeout;
    check_peer(rank, size, root, "broadcast from", what);
    start_collective(CollectiveOp::broadcast, data.size(), root, what, deadline);
    if (size == 1) return;
    constexpr std::size_t segment = std::size_t{1} << 30;
    for (std::size_t begin = 0; begin < data.size(); begin += segment) {
      const std::span<std::byte> part = data.subspan(begin, std::min(segment, data.size() - begin));
      MPI_Request request = MPI_REQUEST_NULL;
      check(MPI_Ibcast(part.data(), static_cast<int>(part.size()), MPI_BYTE, root, comm, &request), "MPI_Ibcast",
            context(what));
      finish(request, CollectiveOp::broadcast, "MPI_Ibcast", what, deadline);
    }
  }
};

MpiCommunicator::MpiCommunicator(std::chrono::milliseconds timeout) : state_(std::make_unique<State>()) {
  if (timeout.count() <= 0)
    throw Error("MPI communicator: timeout must be positive, got " + std::to_string(timeout.count()) + " ms");
  ensure_mpi_initialized();
  State& s = *state_;
  s.timeout = timeout;
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.size);
  // A communicator of our own: its messages never mix with the application's or another instance's.
  MPI_Request request = MPI_REQUEST_NULL;
  const std::string context = "MPI communicator: rank " + std::to_string(s.rank);
  check(MPI_Comm_idup(MPI_COMM_WORLD, &s.comm, &request), "MPI_Comm_idup", context);
  const auto deadline = Clock::now() + timeout;
  const auto since = Clock::now();
  for (int done = 0;;) {
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test", context);
    if (done) break;
    if (Clock::now() >= deadline)
      throw Error(context + " timed out after " + ms_text(timeout) +
                  " creating the communicator (MPI_Comm_idup): every rank must construct one; has one died?");
    back_off(since);
  }
  MPI_Comm_set_errhandler(s.comm, MPI_ERRORS_RETURN);
  s.unexpected.resize(static_cast<std::size_t>(s.size));
  s.incoming.assign(static_cast<std::size_t>(s.size), MPI_REQUEST_NULL);
  s.incoming_buffer.resize(static_cast<std::size_t>(s.size));
}

MpiCommunicator::~MpiCommunicator() {
  State& s = *state_;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (s.comm == MPI_COMM_NULL || finalized) return;  // a communicator outliving MPI has nothing left to free
  // MPI requires sends to complete before MPI_Finalize: wait for the receivers (briefly after an abort,
  // whose peers may never take them).
  const auto deadline = Clock::now() + (s.first_abort ? std::chrono::milliseconds(100) : s.timeout);
  const auto since = Clock::now();
  while (!s.send_requests.empty() && Clock::now() < deadline) {
    s.reap_sends();
    back_off(since);
  }
  bool clean = s.send_requests.empty() && !s.first_abort && s.collectives_broken.empty();
  for (MPI_Request r : s.incoming) clean = clean && r == MPI_REQUEST_NULL;
  if (!clean) {
    // Requests are still in flight, or peers may still send to this communicator: keep its buffers and
    // the communicator itself alive (leaked on purpose), so that late traffic lands nowhere harmful and
    // a later communicator never reuses its context.
    new std::vector<std::vector<std::byte>>(std::move(s.send_buffers));
    new std::vector<std::vector<std::byte>>(std::move(s.incoming_buffer));
    return;
  }
  MPI_Comm_free(&s.comm);
}

int MpiCommunicator::rank() const { return state_->rank; }
int MpiCommunicator::size() const { return state_->size; }

void MpiCommunicator::send(int to, const CommTag& tag, const Tensor& tensor, const std::string& what) {
  State& s = *state_;
  check_peer(s.rank, s.size, to, "send to", what);
  s.poll_abort();
  if (s.first_abort) s.throw_aborted(what, "sending " + describe(tag) + " to rank " + std::to_string(to));
  s.reap_sends();
  s.post_send(pack_message(tag, tensor), to, kMessageTag, what);
}

Tensor MpiCommunicator::recv(int from, const CommTag& tag, const std::string& what) {
  State& s = *state_;
  check_peer(s.rank, s.size, from, "receive from", what);
  const std::string doing = "receiving " + describe(tag) + " from rank " + std::to_string(from);
  auto& queue = s.unexpected[static_cast<std::size_t>(from)];
  const auto find = [&] {
    return std::find_if(queue.begin(), queue.end(), [&](const auto& m) { return m.first == tag; });
  };
  s.wait(
      Clock::now() + s.timeout, what, doing, /*abortable=*/true,
      [&] {
        s.pump(from, what);
        return find() != queue.end();
      },
      [&] {
        return doing + " (" + std::to_string(queue.size()) + " other messages from it waiting; rank " +
               std::to_string(from) + " may have died or never sends it)";
      });
  const auto found = find();
  Tensor t = std::move(found->second);
  queue.erase(found);
  return t;
}

void MpiCommunicator::all_reduce_sum(std::span<float> data, const std::string& what) {
  state_->all_reduce_sum(data, what);
}

void MpiCommunicator::broadcast(std::span<std::byte> data, int root, const std::string& what) {
  state_->broadcast(data, root, what);
}

void MpiCommunicator::barrier(const std::string& what) {
  state_->start_collective(CollectiveOp::barrier, 0, 0, what, Clock::now() + state_->timeout);
}

void MpiCommunicator::abort(const std::string& reason) noexcept {
  State& s = *state_;
  try {
    s.poll_abort();
    if (s.first_abort) return;
    s.first_abort = CommAbort{s.rank, clip_reason(reason)};
    const std::string& text = s.first_abort->reason;
    for (int r = 0; r < s.size; ++r)
      if (r != s.rank)
        s.post_send(std::vector<std::byte>(reinterpret_cast<const std::byte*>(text.data()),
                                           reinterpret_cast<const std::byte*>(text.data()) + text.size()),
                    r, kAbortTag, "abort");
  } catch (...) {  // an MPI error or out of memory: the local abort still holds
    if (!s.first_abort) s.first_abort = CommAbort{s.rank, {}};
  }
}

std::optional<CommAbort> MpiCommunicator::aborted() const { return state_->first_abort; }

std::string MpiCommunicator::library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

}  // namespace onnxtrain
