#include "executor/comm/local_comm.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>

#include "executor/comm/comm_wire.h"
#include "graph/error.h"
#include "graph/spin_then_wait.h"

namespace onnxtrain {
namespace {

using Clock = std::chrono::steady_clock;

struct Message {
  CommTag tag;
  Tensor tensor;
};

// One direction between two ranks. Only its sender and its receiver wait on `changed` (a message arrived
// or left, or the group aborted), so one condition variable serves both; they poll `changes` first
// (spin_until_ready).
struct Channel {
  std::mutex mutex;
  std::condition_variable changed;
  std::atomic<uint64_t> changes{0};
  std::deque<Message> queue;
};

using comm_wire::CollectiveOp;  // the collectives and their names, as the process-crossing backends have them
using comm_wire::op_name;

// A rank's arguments to the collective now gathering. The rank stays blocked until the collective
// completes (or it withdraws), so the last rank to arrive may read and write every rank's `data`.
struct Arrival {
  bool arrived = false;   // waiting in the collective now
  bool attended = false;  // arrived at the collective now gathering, even if it has withdrawn since
  CollectiveOp op = CollectiveOp::barrier;
  std::byte* data = nullptr;
  std::size_t bytes = 0;  // all_reduce_sum: of all `parts` together
  int root = 0;
  std::span<const std::span<float>> parts;  // all_reduce_sum: the tensors, summed each on its own
};

struct Collective {
  std::mutex mutex;
  std::condition_variable done;
  uint64_t generation = 0;           // completed collectives; a waiter is done when it moves past its own
  std::atomic<uint64_t> changes{0};  // bumped with `generation` and on an abort: what waiters poll
  int arrived_count = 0;
  std::vector<Arrival> arrivals;
  // Why the last completed collective failed (ranks disagreed), "" if it did not. Stays valid for that
  // generation's waiters: the next one cannot complete before they have all returned and arrived again.
  std::string failure;
};

class LocalGroup {
 public:
  LocalGroup(int size, std::chrono::milliseconds timeout, int capacity)
      : size_(size), timeout_(timeout), capacity_(static_cast<std::size_t>(capacity)) {
    channels_.reserve(static_cast<std::size_t>(size) * size);
    for (int i = 0; i < size * size; ++i) channels_.push_back(std::make_unique<Channel>());
    collective_.arrivals.resize(static_cast<std::size_t>(size));
  }

  int size() const { return size_; }

  // `shared`: the receiver gets the sender's buffer (Communicator::send_shared), else a copy.
  void send(int me, int to, const CommTag& tag, const Tensor& tensor, const std::string& what, bool shared) {
    check_peer(me, to, "send to", what);
    const std::string doing = "sending " + describe(tag) + " to rank " + std::to_string(to);
    if (poisoned_) throw_aborted(what, me, doing);
    Message message{tag, shared ? tensor : tensor.clone()};  // the copy happens outside the lock
    Channel& ch = channel(me, to);
    {
      std::unique_lock lock(ch.mutex);
      const auto deadline = Clock::now() + timeout_;
      const auto has_room = [&] { return poisoned_ || ch.queue.size() < capacity_; };
      const bool ready = spin_until_ready(lock, ch.changes, size_, deadline, has_room) ||
                         ch.changed.wait_until(lock, deadline, has_room);
      if (poisoned_) throw_aborted(what, me, doing);
      if (!ready)
        throw Error(what + ": rank " + std::to_string(me) + " timed out after " + timeout_text() + " " + doing +
                    ": its channel holds " + std::to_string(ch.queue.size()) + " messages rank " + std::to_string(to) +
                    " has not received (capacity " + std::to_string(capacity_) + ")");
      ch.queue.push_back(std::move(message));
      ch.changes.fetch_add(1, std::memory_order_release);
    }
    ch.changed.notify_all();
  }

  Tensor recv(int me, int from, const CommTag& tag, const std::string& what) {
    check_peer(me, from, "receive from", what);
    const std::string doing = "receiving " + describe(tag) + " from rank " + std::to_string(from);
    if (poisoned_) throw_aborted(what, me, doing);
    Channel& ch = channel(from, me);
    Tensor tensor;
    {
      std::unique_lock lock(ch.mutex);
      auto found = ch.queue.end();
      const auto deadline = Clock::now() + timeout_;
      const auto arrived = [&] {
        found = std::find_if(ch.queue.begin(), ch.queue.end(), [&](const Message& m) { return m.tag == tag; });
        return poisoned_ || found != ch.queue.end();
      };
      const bool ready = spin_until_ready(lock, ch.changes, size_, deadline, arrived) ||
                         ch.changed.wait_until(lock, deadline, arrived);
      if (poisoned_) throw_aborted(what, me, doing);
      if (!ready)
        throw Error(what + ": rank " + std::to_string(me) + " timed out after " + timeout_text() + " " + doing + " (" +
                    std::to_string(ch.queue.size()) + " other messages from it waiting)");
      tensor = std::move(found->tensor);
      ch.queue.erase(found);
      ch.changes.fetch_add(1, std::memory_order_release);
    }
    ch.changed.notify_all();
    return tensor;
  }

  void collective(int me, CollectiveOp op, std::byte* data, std::size_t bytes, int root, const std::string& what,
                  std::span<const std::span<float>> parts = {}) {
    const std::string doing = std::string("in ") + op_name(op);
    Collective& c = collective_;
    std::unique_lock lock(c.mutex);
    if (poisoned_) throw_aborted(what, me, doing);
    Arrival& mine = c.arrivals[static_cast<std::size_t>(me)];
    ONNXTRAIN_CHECK(!mine.arrived, "rank " + std::to_string(me) + " entered two collectives at once");
    mine = Arrival{true, true, op, data, bytes, root, parts};
    ++c.arrived_count;
    const uint64_t generation = c.generation;
    if (c.arrived_count == size_) {
      complete(c);
      const std::string failure = c.failure;
      lock.unlock();
      c.done.notify_all();
      if (!failure.empty()) throw Error(what + ": rank " + std::to_string(me) + " " + doing + ": " + failure);
      return;
    }
    const auto deadline = Clock::now() + timeout_;
    const auto completed = [&] { return poisoned_ || c.generation != generation; };
    const bool finished =
        spin_until_ready(lock, c.changes, size_, deadline, completed) || c.done.wait_until(lock, deadline, completed);
    if (c.generation != generation) {  // completed, even if an abort came in meanwhile
      if (!c.failure.empty()) throw Error(what + ": rank " + std::to_string(me) + " " + doing + ": " + c.failure);
      return;
    }
    // Withdraw, so that no later arrival touches this rank's buffer after it has returned. Ranks that
    // timed out too are not the ones to blame: name only those that never came.
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r)
      if (r != me && !c.arrivals[static_cast<std::size_t>(r)].attended) missing.push_back(r);
    mine.arrived = false;
    if (--c.arrived_count == 0)
      for (Arrival& a : c.arrivals) a.attended = false;
    if (poisoned_) throw_aborted(what, me, doing);
    ONNXTRAIN_CHECK(!finished, "collective woke without completing");
    throw Error(what + ": rank " + std::to_string(me) + " timed out after " + timeout_text() + " " + doing +
                " waiting for " + comm_wire::ranks_phrase(missing));
  }

  void abort(int rank, const std::string& reason) noexcept {
    {
      std::lock_guard lock(abort_mutex_);
      if (poisoned_) return;
      try {
        first_abort_ = CommAbort{rank, reason};
      } catch (...) {  // out of memory copying the reason: the rank still matters more
        first_abort_ = CommAbort{rank, {}};
      }
      poisoned_ = true;
    }
    // Taking each mutex before notifying closes the gap between a waiter's check of `poisoned_` and its
    // sleep, so no waiter misses the wake-up.
    for (auto& ch : channels_) {
      {
        std::lock_guard lock(ch->mutex);
        ch->changes.fetch_add(1, std::memory_order_release);
      }
      ch->changed.notify_all();
    }
    {
      std::lock_guard lock(collective_.mutex);
      collective_.changes.fetch_add(1, std::memory_order_release);
    }
    collective_.done.notify_all();
  }

  std::optional<CommAbort> aborted() const {
    std::lock_guard lock(abort_mutex_);
    return first_abort_;
  }

 private:
  Channel& channel(int from, int to) { return *channels_[static_cast<std::size_t>(from) * size_ + to]; }

  std::string timeout_text() const { return std::to_string(timeout_.count()) + " ms"; }

  void check_peer(int me, int peer, const char* verb, const std::string& what) const {
    if (peer < 0 || peer >= size_)
      throw Error(what + ": rank " + std::to_string(me) + " cannot " + verb + " rank " + std::to_string(peer) +
                  ": the group has ranks 0.." + std::to_string(size_ - 1));
  }

  [[noreturn]] void throw_aborted(const std::string& what, int me, const std::string& doing) const {
    const std::optional<CommAbort> a = aborted();
    const std::string who = a ? "rank " + std::to_string(a->rank) : "a rank";
    throw Error(what + ": rank " + std::to_string(me) + " gave up " + doing + ": " + who + " aborted" +
                (a && !a->reason.empty() ? ": " + a->reason : std::string()));
  }

  // Runs under the collective mutex by the last rank to arrive; every other rank is blocked in its wait.
  void complete(Collective& c) {
    c.failure.clear();
    const Arrival& first = c.arrivals[0];
    for (int r = 1; r < size_ && c.failure.empty(); ++r) {
      const Arrival& a = c.arrivals[static_cast<std::size_t>(r)];
      if (a.op != first.op || a.bytes != first.bytes || (first.op == CollectiveOp::broadcast && a.root != first.root) ||
          !same_sizes(a.parts, first.parts))
        c.failure = "ranks disagree: rank 0 called " + describe_arrival(first) + ", rank " + std::to_string(r) +
                    " called " + describe_arrival(a);
    }
    if (c.failure.empty()) {
      if (first.op == CollectiveOp::all_reduce_sum) reduce_sum(c);
      if (first.op == CollectiveOp::broadcast) {
        const std::byte* source = c.arrivals[static_cast<std::size_t>(first.root)].data;
        for (const Arrival& a : c.arrivals)
          if (a.data != source && a.bytes > 0) std::memcpy(a.data, source, a.bytes);
      }
    }
    for (Arrival& a : c.arrivals) a.arrived = a.attended = false;
    c.arrived_count = 0;
    ++c.generation;
    c.changes.fetch_add(1, std::memory_order_release);
  }

  static bool same_sizes(std::span<const std::span<float>> a, std::span<const std::span<float>> b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a[i].size() != b[i].size()) return false;
    return true;
  }

  // Sum in rank order per element, ((x0 + x1) + x2) + ..., then the same result to every rank; part by
  // part. Blocked so the inner loops vectorise without changing the per-element order. (An OpenMP team
  // here, while the other ranks' threads sleep, was tried: its pool threads then spin beside the replicas'
  // own, and no gain could be told from this shared machine's noise.)
  void reduce_sum(Collective& c) {
    constexpr std::size_t block = 4096;
    std::vector<float> sum(block);
    for (std::size_t part = 0; part < c.arrivals[0].parts.size(); ++part) {
      const auto at = [&](int r) { return c.arrivals[static_cast<std::size_t>(r)].parts[part].data(); };
      const std::size_t n = c.arrivals[0].parts[part].size();
      for (std::size_t begin = 0; begin < n; begin += block) {
        const std::size_t count = std::min(block, n - begin);
        std::copy(at(0) + begin, at(0) + begin + count, sum.data());
        for (int r = 1; r < size_; ++r) {
          const float* x = at(r) + begin;
          for (std::size_t i = 0; i < count; ++i) sum[i] += x[i];
        }
        for (int r = 0; r < size_; ++r) std::copy(sum.data(), sum.data() + count, at(r) + begin);
      }
    }
  }

  static std::string describe_arrival(const Arrival& a) {
    switch (a.op) {
      case CollectiveOp::all_reduce_sum:
        return "all_reduce_sum of " + std::to_string(a.bytes / sizeof(float)) + " floats" +
               (a.parts.size() == 1 ? std::string() : " in " + std::to_string(a.parts.size()) + " tensors");
      case CollectiveOp::broadcast:
        return "broadcast of " + std::to_string(a.bytes) + " bytes from rank " + std::to_string(a.root);
      case CollectiveOp::barrier:
        return "barrier";
    }
    return "?";
  }

  const int size_;
  const std::chrono::milliseconds timeout_;
  const std::size_t capacity_;
  std::vector<std::unique_ptr<Channel>> channels_;  // [from * size + to]
  Collective collective_;
  std::atomic<bool> poisoned_{false};
  mutable std::mutex abort_mutex_;
  std::optional<CommAbort> first_abort_;
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }

  void send(int to, const CommTag& tag, const Tensor& tensor, const std::string& what) override {
    group_->send(rank_, to, tag, tensor, what, false);
  }
  void send_shared(int to, const CommTag& tag, const Tensor& tensor, const std::string& what) override {
    group_->send(rank_, to, tag, tensor, what, true);
  }
  Tensor recv(int from, const CommTag& tag, const std::string& what) override {
    return group_->recv(rank_, from, tag, what);
  }
  void all_reduce_sum(std::span<float> data, const std::string& what) override {
    all_reduce_sum_each(std::span<const std::span<float>>(&data, 1), what);
  }
  void all_reduce_sum_each(std::span<const std::span<float>> tensors, const std::string& what) override {
    std::size_t bytes = 0;
    for (const std::span<float>& t : tensors) bytes += t.size_bytes();
    group_->collective(rank_, CollectiveOp::all_reduce_sum, nullptr, bytes, 0, what, tensors);
  }
  void broadcast(std::span<std::byte> data, int root, const std::string& what) override {
    if (root < 0 || root >= size())
      throw Error(what + ": rank " + std::to_string(rank_) + " cannot broadcast from rank " + std::to_string(root) +
                  ": the group has ranks 0.." + std::to_string(size() - 1));
    group_->collective(rank_, CollectiveOp::broadcast, data.data(), data.size_bytes(), root, what);
  }
  void barrier(const std::string& what) override {
    group_->collective(rank_, CollectiveOp::barrier, nullptr, 0, 0, what);
  }
  void abort(const std::string& reason) noexcept override { group_->abort(rank_, reason); }
  std::optional<CommAbort> aborted() const override { return group_->aborted(); }

 private:
  std::shared_ptr<LocalGroup> group_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_local_group(int size, std::chrono::milliseconds timeout, int capacity) {
  if (size < 1) throw Error("local communicator group: size must be at least 1, got " + std::to_string(size));
  if (capacity < 1)
    throw Error("local communicator group: channel capacity must be at least 1, got " + std::to_string(capacity));
  if (timeout.count() <= 0)
    throw Error("local communicator group: timeout must be positive, got " + std::to_string(timeout.count()) + " ms");
  auto group = std::make_shared<LocalGroup>(size, timeout, capacity);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < size; ++r) comms.push_back(std::make_unique<LocalCommunicator>(group, r));
  return comms;
}

}  // namespace onnxtrain
