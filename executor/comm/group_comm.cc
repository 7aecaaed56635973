#include "executor/comm/group_comm.h"

#include <algorithm>
#include <cstring>

#include "graph/error.h"

namespace onnxtrain {
namespace {

class GroupCommunicator final : public Communicator {
 public:
  GroupCommunicator(Communicator& parent, std::vector<int> ranks, int channel)
      : parent_(parent), ranks_(std::move(ranks)), channel_(channel) {
    const auto self = std::find(ranks_.begin(), ranks_.end(), parent_.rank());
    rank_ = static_cast<int>(self - ranks_.begin());
  }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }

  void send(int to, const CommTag& tag, const Tensor& tensor, const std::string& what) override {
    parent_.send(ranks_.at(static_cast<size_t>(to)), tag, tensor, what);
  }
  Tensor recv(int from, const CommTag& tag, const std::string& what) override {
    return parent_.recv(ranks_.at(static_cast<size_t>(from)), tag, what);
  }

  // Gathered on group rank 0, added there in group-rank order, sent back.
  void all_reduce_sum(std::span<float> data, const std::string& what) override {
    const CommTag up = next_tag(0), down = next_tag(1);
    if (rank_ != 0) {
      parent_.send(ranks_[0], up, as_tensor(data), what);
      copy_into(parent_.recv(ranks_[0], down, what), data, what);
      return;
    }
    for (int r = 1; r < size(); ++r) {
      const Tensor part = parent_.recv(ranks_[r], up, what);
      check_size(part, data.size_bytes(), what, r);
      const float* p = part.data<float>().data();
      for (size_t i = 0; i < data.size(); ++i) data[i] += p[i];
    }
    const Tensor sum = as_tensor(data);
    for (int r = 1; r < size(); ++r) parent_.send(ranks_[r], down, sum, what);
  }

  void broadcast(std::span<std::byte> data, int root, const std::string& what) override {
    const CommTag tag = next_tag(0);
    ++sequence_;  // every rank counts two tags per collective
    if (rank_ == root) {
      Tensor t(DType::UInt8, {static_cast<int64_t>(data.size())});
      if (!data.empty()) std::memcpy(t.raw(), data.data(), data.size());
      for (int r = 0; r < size(); ++r)
        if (r != root) parent_.send(ranks_[r], tag, t, what);
      return;
    }
    const Tensor t = parent_.recv(ranks_.at(static_cast<size_t>(root)), tag, what);
    check_size(t, data.size(), what, root);
    if (!data.empty()) std::memcpy(data.data(), t.raw(), data.size());
  }

  void barrier(const std::string& what) override {
    float one = 0;
    all_reduce_sum(std::span<float>(&one, 1), what);
  }

  void abort(const std::string& reason) noexcept override { parent_.abort(reason); }
  std::optional<CommAbort> aborted() const override { return parent_.aborted(); }

 private:
  // Two tags per collective (up to the root, down from it), numbered alike on every member.
  CommTag next_tag(int direction) {
    const CommTag tag{.micro_batch = sequence_, .kind = kCollectiveKind + channel_, .index = direction};
    if (direction == 1) ++sequence_;
    return tag;
  }
  static Tensor as_tensor(std::span<const float> data) {
    Tensor t(DType::Float32, {static_cast<int64_t>(data.size())});
    if (!data.empty()) std::memcpy(t.raw(), data.data(), data.size_bytes());
    return t;
  }
  void check_size(const Tensor& t, size_t bytes, const std::string& what, int from) const {
    if (t.nbytes() != bytes) {
      throw Error(what + ": group rank " + std::to_string(rank_) + " expected " + std::to_string(bytes) +
                  " bytes from group rank " + std::to_string(from) + ", got " + std::to_string(t.nbytes()) +
                  " (the members called different collectives)");
    }
  }
  void copy_into(const Tensor& t, std::span<float> data, const std::string& what) const {
    check_size(t, data.size_bytes(), what, 0);
    if (!data.empty()) std::memcpy(data.data(), t.raw(), data.size_bytes());
  }

  Communicator& parent_;
  std::vector<int> ranks_;
  int channel_ = 0;
  int rank_ = 0;
  int64_t sequence_ = 0;
};

}  // namespace

std::unique_ptr<Communicator> make_subgroup(Communicator& parent, std::vector<int> ranks, int channel) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  if (ranks.empty() || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() || sorted.front() < 0 ||
      sorted.back() >= parent.size() || !std::binary_search(sorted.begin(), sorted.end(), parent.rank())) {
    throw Error("communicator group: the ranks must be distinct ranks of the " + std::to_string(parent.size()) +
                "-rank parent and include this rank (" + std::to_string(parent.rank()) + ")");
  }
  return std::make_unique<GroupCommunicator>(parent, std::move(ranks), channel);
}

}  // namespace onnxtrain
