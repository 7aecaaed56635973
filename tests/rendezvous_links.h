// A host stand-in for NCCL's point-to-point semantics (executor/pipeline/grouped_transport.h), for tests of
// the grouped transport without GPUs. Values are host Tensors. Each rank's posted groups run one after
// another, as on a stream: only the operations of its oldest unfinished group are active. An active send
// and the active recv it matches (the same pair of ranks, the same position in each side's order)
// complete together, copying the bytes; nothing is buffered. A group is done when all its operations
// are. With `grouped` false every operation is posted alone as it is queued, as NCCL calls outside a group
// are. Deadlocks show as groups that never finish (GroupedTransport's timeout reports them).
#pragma once

#include <algorithm>
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
  explicit RendezvousLinks(bool grouped = true) : grouped_(grouped) {}

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
    bool send;
    int from, to;
    int rank;        // the poster
    uint64_t group;  // its group's sequence number on that rank
    Tensor value;    // the sender's, or the receiver's buffer (Tensor copies share it)
    bool done = false;
  };
  struct Stream {
    std::deque<std::vector<std::shared_ptr<Transfer>>> groups;  // posted, oldest first
    uint64_t next_group = 0, active_group = 0;
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
    bool done() override { return links_.done(rank_); }
    void abort() noexcept override {}

   private:
    void queue(int from, int to, const StageValue& value, bool send) {
      ONNXTRAIN_CHECK(!value.on_device(), "rendezvous link: host values only");
      queued_.push_back(std::make_shared<Transfer>(
          Transfer{.send = send, .from = from, .to = to, .rank = rank_, .group = 0, .value = value.host}));
      if (!links_.grouped_) post();
    }
    RendezvousLinks& links_;
    int rank_;
    std::vector<std::shared_ptr<Transfer>> queued_;
  };

  void post(int rank, std::vector<std::shared_ptr<Transfer>> group) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++groups_;
    largest_ = std::max(largest_, group.size());
    Stream& stream = streams_[rank];
    if (stream.groups.empty()) stream.active_group = stream.next_group;
    for (const auto& t : group) {
      t->group = stream.next_group;
      (t->send ? sends_ : recvs_)[{t->from, t->to}].push_back(t);
    }
    ++stream.next_group;
    stream.groups.push_back(std::move(group));
    settle();
  }

  bool done(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    return streams_[rank].groups.empty();
  }

  bool active(const Transfer& t) { return streams_[t.rank].active_group == t.group; }

  // Matches active sends with active recvs and retires finished groups until nothing changes.
  void settle() {
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& [link, sends] : sends_) {
        auto& recvs = recvs_[link];
        while (!sends.empty() && !recvs.empty() && active(*sends.front()) && active(*recvs.front())) {
          Transfer& s = *sends.front();
          Transfer& r = *recvs.front();
          ONNXTRAIN_CHECK(s.value.nbytes() == r.value.nbytes(), "rendezvous: a send and its recv differ in size");
          std::memcpy(r.value.raw(), s.value.raw(), s.value.nbytes());
          s.done = r.done = true;
          sends.pop_front();
          recvs.pop_front();
          changed = true;
        }
      }
      for (auto& [rank, stream] : streams_) {
        while (!stream.groups.empty() && std::all_of(stream.groups.front().begin(), stream.groups.front().end(),
                                                     [](const auto& t) { return t->done; })) {
          stream.groups.pop_front();
          ++stream.active_group;
          changed = true;
        }
      }
    }
  }

  const bool grouped_;
  mutable std::mutex mutex_;
  std::map<int, Stream> streams_;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Transfer>>> sends_, recvs_;
  int64_t groups_ = 0;
  size_t largest_ = 0;
};

}  // namespace onnxtrain::testing_support
