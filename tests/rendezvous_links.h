// A host stand-in for NCCL's point-to-point semantics (executor/pipeline/grouped_transport.h), for tests of
// the grouped transport without GPUs. Values are host Tensors. post() puts a rank's queued sends and recvs
// up at once; a send and the recv it matches (the same pair of ranks, the same position in each side's
// order) complete together, copying the bytes; nothing is buffered. post() returns only when every
// operation of its group has completed: stricter than NCCL, whose host waits only at its next stream
// synchronisation, so a program that completes here completes over NCCL. A group that cannot complete
// within the timeout throws Error (a deadlock). With `grouped` false every operation is posted alone, as
// NCCL calls outside a group are.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "executor/pipeline/grouped_transport.h"
#include "graph/error.h"

namespace onnxtrain::testing_support {

class RendezvousLinks {
 public:
  RendezvousLinks(std::chrono::milliseconds timeout, bool grouped = true) : timeout_(timeout), grouped_(grouped) {}

  // Rank `rank`'s link, used by that rank's thread.
  std::unique_ptr<PeerLink> link(int rank) { return std::make_unique<Link>(*this, rank); }

  int64_t groups_posted() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return groups_;
  }
  size_t largest_group() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return largest_;
  }

 private:
  struct Transfer {
    Tensor value;  // the sender's, or the receiver's buffer (Tensor copies share it)
    bool done = false;
  };
  using Queue = std::deque<std::shared_ptr<Transfer>>;

  struct Queued {
    int from, to;
    bool send;
    std::shared_ptr<Transfer> transfer;
  };

  class Link final : public PeerLink {
   public:
    Link(RendezvousLinks& links, int rank) : links_(links), rank_(rank) {}
    StageValue allocate(DType dtype, const std::vector<int64_t>& sizes) override {
      return {.host = Tensor(dtype, sizes), .device = nullptr};
    }
    void send(int peer, const StageValue& value) override { queue(rank_, peer, value, true); }
    void recv(int peer, const StageValue& into) override { queue(peer, rank_, into, false); }
    void post() override {
      if (!queued_.empty()) links_.post(rank_, std::exchange(queued_, {}));
    }

   private:
    void queue(int from, int to, const StageValue& value, bool send) {
      ONNXTRAIN_CHECK(!value.on_device(), "rendezvous link: host values only");
      queued_.push_back({from, to, send, std::make_shared<Transfer>(Transfer{.value = value.host})});
      if (!links_.grouped_) post();
    }
    RendezvousLinks& links_;
    int rank_;
    std::vector<Queued> queued_;
  };

  void post(int rank, std::vector<Queued> group) {
    std::unique_lock<std::mutex> lock(mutex_);
    ++groups_;
    largest_ = std::max(largest_, group.size());
    for (const Queued& q : group) {
      (q.send ? sends_ : recvs_)[{q.from, q.to}].push_back(q.transfer);
      match(q.from, q.to);
    }
    changed_.notify_all();
    const bool completed = changed_.wait_for(lock, timeout_, [&] {
      return std::all_of(group.begin(), group.end(), [](const Queued& q) { return q.transfer->done; });
    });
    if (!completed) {
      std::string waiting;
      for (const Queued& q : group)
        if (!q.transfer->done)
          waiting += std::string(waiting.empty() ? "" : ", ") + (q.send ? "send to " : "recv from ") +
                     std::to_string(q.send ? q.to : q.from);
      throw Error("rendezvous: rank " + std::to_string(rank) + "'s group of " + std::to_string(group.size()) +
                  " transfers did not complete in " + std::to_string(timeout_.count()) +
                  " ms (a deadlock); waiting: " + waiting);
    }
  }

  void match(int from, int to) {
    Queue& sends = sends_[{from, to}];
    Queue& recvs = recvs_[{from, to}];
    while (!sends.empty() && !recvs.empty()) {
      Transfer& s = *sends.front();
      Transfer& r = *recvs.front();
      ONNXTRAIN_CHECK(s.value.nbytes() == r.value.nbytes(), "rendezvous: a send and its recv differ in size");
      std::memcpy(r.value.raw(), s.value.raw(), s.value.nbytes());
      s.done = r.done = true;
      sends.pop_front();
      recvs.pop_front();
    }
  }

  const std::chrono::milliseconds timeout_;
  const bool grouped_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::pair<int, int>, Queue> sends_, recvs_;
  int64_t groups_ = 0;
  size_t largest_ = 0;
};

}  // namespace onnxtrain::testing_support
