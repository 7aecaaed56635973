// Stage values over a link that moves them the way NCCL's send and recv do (executor/comm/nccl_comm.h):
// unbuffered, so a send completes only when the peer's matching recv runs, and launched in groups whose
// operations progress together. Each value's header (dtype and sizes) goes ahead over the host
// communicator, so that the receiver can allocate its buffer before it posts the recv; the payloads wait
// in the link until flush(), which posts them all as one group. The pipeline stages of separate processes
// on GPUs exchange their activations and gradients this way (PipelineTrainer, world mode).
//
//   GroupedTransport transport(comm, std::make_unique<NcclLink>(nccl, stream));
//   worker.execute({Op::SendActivation, 4}, transport);  // header out now, payload queued
//   worker.execute({Op::RecvGradient, 2}, transport);    // header in (waits for it), buffer made, recv queued
//   worker.execute({Op::Backward, 2}, transport);        // the worker flushes first: one group for both
//
// Why groups of consecutive transfers: in 1F1B's steady state stage k sends the activation of mini-batch
// i+1 and then receives the gradient of an earlier one, while stage k+1 sends that gradient and only later
// receives the activation (schedule.h). Posted one by one on a stream, each send would wait for a recv
// queued behind the other's send: a deadlock. In one group stage k's recv progresses beside its send.
// tests/rendezvous_links.h is a host link with the same unbuffered, grouped semantics; the pipeline tests
// run every schedule over it.
#pragma once

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
  // Launch the queued operations as one group. Work that reads a received value afterwards must be
  // ordered after the group (NCCL: it is enqueued on the same stream).
  virtual void post() = 0;
};

class GroupedTransport final : public StageTransport {
 public:
  GroupedTransport(Communicator& comm, std::unique_ptr<PeerLink> link) : comm_(comm), link_(std::move(link)) {}
  void send(int to, const CommTag& tag, const StageValue& value, const std::string& what) override;
  // Waits for the header (counted as idle time), then queues the recv: the value is complete only after
  // the next flush().
  bool try_recv(int from, const CommTag& tag, const std::string& what, StageValue& out) override;
  void flush() override { link_->post(); }

 private:
  Communicator& comm_;
  std::unique_ptr<PeerLink> link_;
};

}  // namespace onnxtrain
