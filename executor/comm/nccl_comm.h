// The `nccl` communication backend: collectives and point-to-point transfers between DEVICE buffers,
// enqueued on CUDA streams. Plain C++ (no NCCL or CUDA header): streams are `void*` (cudaStream_t, e.g.
// cuda::DeviceStream::handle()), buffers are device pointers. Built only with CUDA and NCCL
// (ONNXTRAIN_HAVE_NCCL); otherwise every constructor throws Error("NCCL support not compiled in ...").
//
// One process per rank (mpirun or torchrun): bootstrapped over the host world communicator (or a
// subgroup of it), the way torch.distributed does over its store, so NCCL itself needs no MPI:
//
//   auto world = make_world_communicator(launch, std::chrono::seconds(300));
//   NcclCommunicator nccl(*world, /*device=*/launch.local_rank);  // collective over `world`
//   nccl.all_reduce_sum(grads, count, stream.handle());           // in place, asynchronous
//
// All stages or replicas in one process (one thread drives several GPUs):
//
//   auto comms = NcclCommunicator::create_local({0, 1, 2, 3});    // comms[r]: rank r on cuda:r
//   { NcclGroup group;                                           // one NCCL launch for all four
//     for (int r = 0; r < 4; ++r) comms[r]->all_reduce_sum(grads[r], count, streams[r].handle()); }
//
// Pipeline stages exchange activations and gradients of one step in one group, so the matching sends
// and recvs of both directions cannot deadlock on each other:
//
//   NcclCommunicator::group_start();
//   nccl.send(next, act, act_bytes, stream);  nccl.recv(prev, grad, grad_bytes, stream);
//   NcclCommunicator::group_end();
//
// Semantics. Every call only enqueues work on `stream` and returns; the caller synchronises the stream
// (or records an event) before it reads the result on the host. Collectives are called by every rank in
// the same order with the same sizes (and root). all_reduce_sum is NCCL's ring/tree sum: its order of
// addition differs from the host backends' rank order ((x0 + x1) + x2) + ..., so results are NOT
// bit-identical to the local/MPI/TCP all-reduce: data parallelism over NCCL matches the host path
// within a relative tolerance (float32 rounding of a differently ordered sum), not exactly. Every
// rank still gets the same result as every other rank.
//
// Errors. Every NCCL (and CUDA) call is checked: failure throws Error naming the call, NCCL's error
// string, ncclGetLastError's text and this rank ("rank 1 of 4 on cuda:1"). Asynchronous failures
// (a peer died mid-collective) surface when the stream is synchronised, or as a hang: call abort() (from
// the thread that owns the communicator, or another one while the owner waits on its stream) to tear
// the communicator down; later calls then throw. Once NCCL has recorded an asynchronous failure
// (ncclCommGetAsyncError), the next operation throws it instead of enqueueing onto the broken
// communicator, and the destructor aborts instead of destroying (which would wait forever). Construction without a
// usable GPU throws on EVERY rank of the bootstrap group (the ranks first agree over the host communicator), naming the
// ranks that have none, instead of leaving the others waiting.
#pragma once

#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "executor/comm/comm.h"

namespace onnxtrain {

class NcclCommunicator {
 public:
  // Collective over `bootstrap`: every rank of it constructs one, in the same order of collectives on
  // `bootstrap`. This rank becomes NCCL rank bootstrap.rank() of bootstrap.size(), on cuda:`device`.
  // Rank 0 creates the NCCL unique id, broadcast over `bootstrap`; then ncclCommInitRank. Throws Error
  // when any rank's device is missing (on every rank), or when NCCL initialisation fails (on the ranks
  // where it fails: ncclCommInitRank is NCCL's own blocking collective, the others wait in it).
  NcclCommunicator(Communicator& bootstrap, int device);
  ~NcclCommunicator();  // ncclCommDestroy (nothing when aborted)
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // One communicator per device, all in this process (ncclCommInitAll): result[r] is rank r on
  // cuda:devices[r]. Devices must be distinct and visible. Operations on several of them from one
  // thread must be inside one group (NcclGroup), or each communicator driven by its own thread.
  static std::vector<std::unique_ptr<NcclCommunicator>> create_local(const std::vector<int>& devices);

  int rank() const;
  int size() const;
  int device() const;

  // In place: data (count floats on this rank's device) becomes the element-wise sum over ranks.
  void all_reduce_sum(float* data, std::size_t count, void* stream);
  // In place: root's `bytes` bytes at `data` are copied into every other rank's `data`.
  void broadcast(void* data, std::size_t bytes, int root, void* stream);
  // Point-to-point: every send(peer, ..., bytes) is matched by the peer's recv(this rank, ..., bytes)
  // with the same size, in the same order. Without a group, a send blocks its stream until the peer
  // posts the matching recv; inside a group they progress together.
  void send(int peer, const void* data, std::size_t bytes, void* stream);
  void recv(int peer, void* data, std::size_t bytes, void* stream);

  // ncclGroupStart/ncclGroupEnd: the calls between them (on any communicator, from this thread) are
  // launched together at group_end. Groups nest; group_end throws Error if the group's launch failed.
  static void group_start();
  static void group_end();

  // ncclCommAbort: frees the communicator, aborting its in-flight operations. Idempotent, never throws;
  // every later operation throws Error saying the communicator was aborted.
  void abort() noexcept;
  bool aborted() const;
  // Throws Error when NCCL has recorded an asynchronous failure on this communicator (a peer died during
  // an operation), or it was aborted: for waits that poll instead of synchronising a stream, which would
  // never return then. ncclCommGetAsyncError reads a flag; no synchronisation.
  void check_async_error() const;

  // "rank 1 of 4 on cuda:1" (for error messages).
  std::string describe() const;

  struct State;

 private:
  explicit NcclCommunicator(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// A group as a scope: group_start() on construction, group_end() on leaving it. When the scope is left
// by an exception the group is still ended (NCCL requires it), and a second error is swallowed so the
// first one propagates.
class NcclGroup {
 public:
  NcclGroup() { NcclCommunicator::group_start(); }
  ~NcclGroup() noexcept(false);
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

 private:
  int uncaught_ = std::uncaught_exceptions();
};

}  // namespace onnxtrain
