// How this process was started (directly, by mpirun, or by torchrun), and the world communicator that
// goes with it. The trainer calls these once at start-up; nothing here needs mpi.h.
//
//   LaunchInfo launch = detect_launch();          // reads the environment mpirun / torchrun set
//   std::unique_ptr<Communicator> world = make_world_communicator(launch, std::chrono::seconds(300));
//   // launch.kind == mpi: MpiCommunicator over MPI_COMM_WORLD; torchrun: TcpCommunicator (full mesh);
//   // direct: a 1-rank local communicator (never nullptr), so callers need no special case.
//
// NCCL later bootstraps over the world communicator, the way torch.distributed does over its store:
//
//   ncclUniqueId id{};
//   if (world->rank() == 0) ncclGetUniqueId(&id);
//   world->broadcast(std::as_writable_bytes(std::span(&id, 1)), /*root=*/0, "NCCL unique id");
//   ncclCommInitRank(&nccl, world->size(), id, world->rank());   // after cudaSetDevice(launch.local_rank)
//
// so the NCCL backend needs no MPI and works the same under mpirun and torchrun.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "executor/comm/comm.h"

namespace onnxtrain {

struct LaunchInfo {
  enum class Kind { direct, mpi, torchrun };
  Kind kind = Kind::direct;
  int rank = 0, size = 1, local_rank = 0;
  std::string master_addr;  // torchrun only
  int master_port = 0;      // torchrun only
  std::string source;       // the variable the rank came from, e.g. "OMPI_COMM_WORLD_RANK", "RANK"; "" if direct
};

// "direct", "mpi", "torchrun".
const char* launch_kind_name(LaunchInfo::Kind kind);

// Reads, in this order: Open MPI's OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK, PMIx's PMIX_RANK (size from
// OMPI_COMM_WORLD_SIZE or PMI_SIZE), MPICH/Intel MPI's PMI_RANK/PMI_SIZE (local rank from MPI_LOCALRANKID);
// else torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and LOCAL_RANK (optional, defaults to RANK:
// the one-node case); else direct (rank 0 of 1).
// Throws Error naming the variable when one is malformed (not an integer, rank outside 0..size-1, port
// outside 1..65535) or when a torchrun environment is partial (some of those five set, one missing).
LaunchInfo detect_launch();
// The same with another environment (tests): `getenv(name)` returns the value or nullptr.
LaunchInfo detect_launch(const std::function<const char*(const char*)>& getenv);

// The communicator of every process of this launch. mpi: MpiCommunicator (Error when this build has no
// MPI); torchrun: TcpCommunicator (rendezvous at master_addr:master_port, waiting up to `timeout` for
// the other ranks); direct: a 1-rank local communicator. `timeout` bounds every blocking call.
std::unique_ptr<Communicator> make_world_communicator(const LaunchInfo& launch, std::chrono::milliseconds timeout);

}  // namespace onnxtrain
