// Stage values over a link that moves them the way NCCL's send and recv do (executor/comm/nccl_comm.h):
// unbuffered, so a send completes only when the peer's matching recv runs, and launched in groups whose
// operations progress together while the groups of one rank run one after another (a stream). Each
// value's header (dtype and sizes) goes ahead over the host communicator, so that the receiver can
// allocate its buffer before it posts the recv; the payloads wait in the link until flush(), which
// launches them as one group and waits for it. The pipeline stages of separate processes on GPUs exchange
// their activations and gradients this way (PipelineTrainer, world mode).
//
//   GroupedTransport transport(comm, std::make_unique<NcclLink>(nccl, stream), timeout);
//   worker.execute({Op::SendActivation, 4}, transport);  // header out now, payload queued
//   worker.execute({Op::RecvGradient, 2}, transport);    // header in (waits for it), buffer made, recv queued
//   worker.execute({Op::Backward, 2}, transport);        // the worker flushes first: one group for both
//
// Why groups of consecutive transfers: in 1F1B's steady state stage k sends the activation of mini-batch
// i+1 and then receives the gradient of an earlier one, while stage k+1 sends that gradient and only later
// receives the activation (schedule.h). Launched one by one on a stream, each send would wait for a recv
// queued behind the other's send: a deadlock. In one group stage k's recv progresses beside its send.
// (schedule.h's launch_before says where a Recv must not join the queued sends.)
//
// Why flush() waits, polling, instead of letting the next pass queue behind the group on the stream: a
// wait inside a stream synchronisation could never be interrupted. Polling, a stage notices a neighbour's
// abort (the host communicator's) or its own timeout, tears the link down (ncclCommAbort) and throws, as
// a host transport's recv would. The schedule interpreter of pipeline_schedule_test proves every schedule
// completes with this wait; tests/rendezvous_links.h is a host link with NCCL's semantics that the
// pipeline tests run every strategy over.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "executor/comm/comm.h"
#include "executor/pipeline/stage_transport.h"

namespace onnxtrain {

// Moves stage values between the ranks of one group, in groups of operations (NCCL send/recv, or a test's
// host stand-in). Used by one thread.
class PeerLink {
 public:
  virtual ~PeerLink() = default;
  // A buffer to receive a value of this dtype and these sizes into.
  virtual StageValue allocate(DType dtype, const std::vector<int64_t>& sizes) = 0;
  // Queue sending `value` to `peer`, or receiving the next value from `peer` into `into` (made by
  // allocate): operations between two ranks match in the order each side queues them.
  virtual void send(int peer, const StageValue& value) = 0;
  virtual void recv(int peer, const StageValue& into) = 0;
  // Launch the queued operations as one group, after the groups launched before; returns at once.
  virtual void post() = 0;
  // Whether every launched group has completed (received values are complete then). Throws Error when a
  // transfer failed.
  virtual bool done() = 0;
  // After a failure: abandons the launched transfers (NCCL: ncclCommAbort). Never throws.
  virtual void abort() noexcept = 0;
};

class GroupedTransport final : public StageTransport {
 public:
  // `timeout`: the longest a flush waits for its group (a neighbour stuck or gone).
  GroupedTransport(Communicator& comm, std::unique_ptr<PeerLink> link, std::chrono::milliseconds timeout)
      : comm_(comm), link_(std::move(link)), timeout_(timeout) {}
  void send(int to, const CommTag& tag, const StageValue& value, const std::string& what) override;
  // Waits for the header, then queues the recv: the value is complete only after the next flush().
  bool try_recv(int from, const CommTag& tag, const std::string& what, StageValue& out) override;
  // Launches the queued transfers and waits until they are done (idle time). Throws Error, after
  // abandoning them, when the communicator was aborted or the timeout passed.
  void flush() override;

 private:
  Communicator& comm_;
  std::unique_ptr<PeerLink> link_;
  std::chrono::milliseconds timeout_;
  std::vector<std::string> queued_;  // what the transfers since the last flush carry (for errors)
};

}  // namespace onnxtrain
