// The communicator a pipeline stage (or data-parallel replica) talks to its peers through: tagged
// point-to-point tensors, a deterministic float all-reduce, broadcast and barrier. One Communicator per
// rank, used by one thread. Implementations: `local` (threads in one process, local_comm.h), MPI
// (mpi_comm.h), TCP with a torchrun-style rendezvous (tcp_comm.h), NCCL (nccl_comm.h) and subgroups of
// any of them (group_comm.h).
//
//   // stage k sends its activation for micro-batch i to stage k+1, which receives it by tag:
//   comm.send(k + 1, CommTag{.micro_batch = i, .kind = CommTag::activation, .index = 0}, out,
//             "stage 0, micro-batch 3, activation 'conv1_out'");
//   Tensor in = comm.recv(k - 1, CommTag{.micro_batch = i, .kind = CommTag::activation, .index = 0}, what);
//
// Failure: every blocking call throws Error after the group's timeout, naming `what`, this rank and the
// peer(s) it waited for. A rank that fails calls `abort(reason)`; every rank blocked in (or later entering)
// a call of the group then throws Error naming the aborted rank and its reason instead of waiting out the
// timeout. Pattern for one thread per rank:
//
//   try { run_stage(comm); } catch (const std::exception& e) { comm.abort(e.what()); throw; }
//   ...after joining: if (auto a = comm.aborted()) the root cause is rank a->rank: a->reason.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "graph/tensor.h"

namespace onnxtrain {

// Identifies a point-to-point message between one (from, to) pair; recv matches it exactly.
struct CommTag {
  static constexpr int activation = 0;
  static constexpr int gradient = 1;
  static constexpr int other = 2;

  int64_t micro_batch = 0;
  int kind = activation;  // activation, gradient or other
  int index = 0;          // which value of that kind (e.g. StageGraphs::send_activations position)

  friend bool operator==(const CommTag&, const CommTag&) = default;
};

// "micro-batch 5, activation #2" (for error messages).
inline std::string describe(const CommTag& tag) {
  const char* kind = tag.kind == CommTag::activation ? "activation"
                     : tag.kind == CommTag::gradient ? "gradient"
                     : tag.kind == CommTag::other    ? "other"
                                                     : nullptr;
  return "micro-batch " + std::to_string(tag.micro_batch) + ", " +
         (kind ? std::string(kind) : "kind " + std::to_string(tag.kind)) + " #" + std::to_string(tag.index);
}

// Which rank aborted the group first, and why.
struct CommAbort {
  int rank = -1;
  std::string reason;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sends a copy of `tensor` (the caller may reuse its buffer at once) to rank `to`. Blocks only while
  // the (this, to) channel is full. Messages with equal tags arrive in send order.
  virtual void send(int to, const CommTag& tag, const Tensor& tensor, const std::string& what) = 0;
  // As send, for a tensor nobody writes again (a pipeline stage's activation or gradient: the sender only
  // reads it after, and recycles it only as its sole owner): a group in one address space hands over the
  // buffer itself, without the copy. Others copy, as send.
  virtual void send_shared(int to, const CommTag& tag, const Tensor& tensor, const std::string& what) {
    send(to, tag, tensor, what);
  }
  // The message from `from` carrying exactly `tag`, waiting for it even if other tags arrived first.
  virtual Tensor recv(int from, const CommTag& tag, const std::string& what) = 0;

  // Collectives: every rank of the group calls them in the same order with the same sizes (and root).
  // all_reduce_sum: element-wise sum over ranks, added in rank order ((x0 + x1) + x2) + ..., so every rank
  // gets bit-identical results, the same on every run.
  virtual void all_reduce_sum(std::span<float> data, const std::string& what) = 0;
  // all_reduce_sum of each of `tensors` (every rank passes as many, of the same sizes, in the same order),
  // with the same results. A backend may do them as one collective: the local one does (one hand-over
  // per step instead of one per gradient); the default calls all_reduce_sum for each in turn.
  virtual void all_reduce_sum_each(std::span<const std::span<float>> tensors, const std::string& what) {
    for (const std::span<float>& t : tensors) all_reduce_sum(t, what);
  }
  // Copies root's `data` into every other rank's `data` (all the same size).
  virtual void broadcast(std::span<std::byte> data, int root, const std::string& what) = 0;
  virtual void barrier(const std::string& what) = 0;

  // Poisons the group: from now on every blocking call of every rank (including ones already waiting)
  // throws Error naming this rank and `reason`. Only the first abort of a group is kept; later ones (the
  // woken peers aborting in turn) change nothing. Never blocks on peers, never throws.
  virtual void abort(const std::string& reason) noexcept = 0;
  // The group's first abort, if any.
  virtual std::optional<CommAbort> aborted() const = 0;
};

}  // namespace onnxtrain
