// The `tcp` communication backend: one process (or, in tests, one thread) per rank, a full mesh of TCP
// connections, for processes started torchrun-style (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) where
// there is no MPI. IPv4 only.
//
//   TcpRendezvous rv{.master_addr = "127.0.0.1", .master_port = 29500, .rank = r, .size = 4};
//   TcpCommunicator comm(rv, std::chrono::seconds(60));   // returns once all 4 ranks are connected
//   comm.all_reduce_sum(gradients, "step 7 gradients");
//
// Rendezvous: rank 0 listens on MASTER_PORT (all interfaces); every other rank opens its own listening
// socket (an ephemeral port), connects to MASTER_ADDR:MASTER_PORT (retrying until the timeout, since rank
// 0 may start later) and reports its rank and port; rank 0 answers with the table of (address as rank 0
// saw it, port); rank r then connects to ranks 1..r-1 and accepts ranks r+1..size-1. The connection to
// rank 0 is the rendezvous connection itself.
//
// Semantics are those of comm.h and the local backend: send never blocks (the tensor is packed into a
// frame on a per-peer output queue), recv matches the exact tag (frames of other tags wait in a per-peer
// queue), collectives exchange a small descriptor with every rank first (so a mismatch fails on every
// rank with the same message and a timeout names the ranks that never came), all_reduce_sum is a
// reduce-scatter (rank j sums chunk j in rank order) plus all-gather, so results are bit-identical to
// ((x0 + x1) + x2) + ... on every rank; chunks of 1 MiB or more go out without a copy (the collective
// returns once the sockets have taken them). One I/O thread per communicator (poll()) reads every
// connection and writes the queues, so data keeps moving while the rank's thread computes; the rank's
// thread waits on a condition variable. A peer whose connection closes (it exited or was killed) makes
// every wait on it throw at once: "rank P closed its connection (did it die?)". After a collective fails
// on this rank (timeout, peer gone) the group's collectives are out of step: later collectives throw at
// once; point-to-point messages to live peers still work. aborted() reports aborts as they arrive.
// The destructor flushes queued frames (waiting up to the timeout for slow readers), then closes.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "executor/comm/comm.h"

namespace onnxtrain {

struct TcpRendezvous {
  std::string master_addr = "127.0.0.1";  // host name or dotted IPv4 address of rank 0
  int master_port = 0;                    // 1..65535
  int rank = 0;
  int size = 1;
  // How long the constructor waits for the mesh to form (ranks start at different times); 0: `timeout`.
  std::chrono::milliseconds connect_timeout{0};
};

class TcpCommunicator final : public Communicator {
 public:
  // Connects the mesh; throws Error (naming the master address, the ranks still missing: the first few
  // and a count) when it is not complete within `timeout`, or for bad arguments. A world whose mesh needs
  // more sockets than RLIMIT_NOFILE allows (raised to its hard limit when that is enough) is refused at
  // once, naming WORLD_SIZE. `timeout` also bounds every later blocking call.
  TcpCommunicator(const TcpRendezvous& rendezvous, std::chrono::milliseconds timeout);
  ~TcpCommunicator() override;
  TcpCommunicator(const TcpCommunicator&) = delete;
  TcpCommunicator& operator=(const TcpCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  void send(int to, const CommTag& tag, const Tensor& tensor, const std::string& what) override;
  Tensor recv(int from, const CommTag& tag, const std::string& what) override;
  void all_reduce_sum(std::span<float> data, const std::string& what) override;
  void broadcast(std::span<std::byte> data, int root, const std::string& what) override;
  void barrier(const std::string& what) override;
  void abort(const std::string& reason) noexcept override;
  std::optional<CommAbort> aborted() const override;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace onnxtrain
