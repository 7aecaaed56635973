// The `mpi` communication backend: one process per rank, started by mpirun, over (a duplicate of)
// MPI_COMM_WORLD. Built only when CMake finds MPI (ONNXTRAIN_HAVE_MPI); this header needs no mpi.h.
//
//   // mpirun -np 4 onnxtrain train ...
//   MpiCommunicator comm(std::chrono::seconds(300));    // rank() / size() of MPI_COMM_WORLD
//   comm.send(comm.rank() + 1, CommTag{.micro_batch = i}, activation, "stage 0, micro-batch 3");
//   comm.all_reduce_sum(gradients, "step 7 gradients");
//
// MPI is initialised by the first MpiCommunicator (MPI_Init_thread, MPI_THREAD_SERIALIZED: one thread
// at a time calls MPI) and finalised once at process exit (std::atexit), unless the application had
// initialised it itself. The constructor throws Error, without touching MPI, when the process was not
// started by mpirun (no OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK in the environment): MPI_Init in a
// singleton would otherwise try to start its own runtime.
//
// Semantics are those of comm.h and the local backend. send packs header and payload into one buffer
// and posts MPI_Isend (never blocks; completed sends are reaped on later calls). recv takes messages
// from `from` in arrival order (MPI_Improbe + MPI_Imrecv), keeps the ones with other tags and returns
// the first with the exact tag. Collectives first exchange a small descriptor with every rank (so a
// mismatch fails on every rank with the same message and a timeout names the ranks that never came),
// then: all_reduce_sum = MPI_Ialltoallv (reduce-scatter: rank j gets every rank's chunk j and adds
// them in rank order) + MPI_Iallgatherv, bit-identical to ((x0 + x1) + x2) + ... on every rank;
// broadcast = MPI_Ibcast. Every wait polls (MPI_Test*, MPI_Iprobe) until the deadline and also probes
// the abort tag, so abort(reason) on one rank makes the others throw naming it. MPI errors return (the
// communicator's error handler is MPI_ERRORS_RETURN) and become Error with MPI's error string. After a
// collective failed on this rank (timeout, abort) the group's collectives are out of step: later
// collectives throw at once; point-to-point still works. Tensors over 2 GiB - 1 bytes are rejected.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "executor/comm/comm.h"

namespace onnxtrain {

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates MPI_COMM_WORLD (collective: every rank constructs one, in the same order). `timeout`
  // bounds every blocking call, the construction included.
  explicit MpiCommunicator(std::chrono::milliseconds timeout);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  void send(int to, const CommTag& tag, const Tensor& tensor, const std::string& what) override;
  Tensor recv(int from, const CommTag& tag, const std::string& what) override;
  void all_reduce_sum(std::span<float> data, const std::string& what) override;
  void broadcast(std::span<std::byte> data, int root, const std::string& what) override;
  void barrier(const std::string& what) override;
  void abort(const std::string& reason) noexcept override;
  std::optional<CommAbort> aborted() const override;

  // "Open MPI v4.1.4, ..." (MPI_Get_library_version; callable before MPI_Init).
  static std::string library_version();

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace onnxtrain
