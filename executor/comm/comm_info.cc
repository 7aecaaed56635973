#include "executor/comm/comm_info.h"

#if ONNXTRAIN_HAVE_MPI
#include <mpi.h>
#endif
#if ONNXTRAIN_HAVE_NCCL
#include "executor/comm/nccl_version.h"
#endif

namespace onnxtrain {
namespace {

#if ONNXTRAIN_HAVE_MPI
// MPI_Get_library_version is one of the few calls allowed before MPI_Init.
std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown (MPI_Get_library_version failed)";
  std::string version(text, static_cast<std::size_t>(length));
  while (!version.empty() && (version.back() == '\n' || version.back() == '\0' || version.back() == ' ')) {
    version.pop_back();
  }
  return version;
}
#endif

}  // namespace

std::vector<CommBackendInfo> comm_backends() {
  std::vector<CommBackendInfo> backends;
  backends.push_back({.name = "local",
                      .compiled = true,
                      .version = "built in",
                      .detail = "stages as threads in one process, tensors passed by reference"});
#if ONNXTRAIN_HAVE_MPI
  backends.push_back({.name = "mpi",
                      .compiled = true,
                      .version = mpi_library_version(),
                      .detail = "one process per stage or replica, started by mpirun"});
#else
  backends.push_back(
      {.name = "mpi", .compiled = false, .detail = "not compiled in (MPI not found or ONNXTRAIN_MPI=OFF)"});
#endif
#if ONNXTRAIN_HAVE_NCCL
  backends.push_back({.name = "nccl",
                      .compiled = true,
                      .version = nccl_library_version(),
                      .detail = "GPU collectives and send/recv (executor/comm/nccl_comm.h), bootstrapped over the "
                                "world communicator (mpirun or torchrun)"});
#else
  backends.push_back({.name = "nccl",
                      .compiled = false,
                      .detail = "not compiled in (needs CUDA and NCCL; ONNXTRAIN_CUDA=OFF or not found)"});
#endif
  backends.push_back({.name = "tcp",
                      .compiled = true,
                      .version = "built in",
                      .detail = "processes started torchrun-style (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)"});
  return backends;
}

std::vector<std::string> compiled_comm_backend_names() {
  std::vector<std::string> names;
  for (const CommBackendInfo& b : comm_backends()) {
    if (b.compiled) names.push_back(b.name);
  }
  return names;
}

}  // namespace onnxtrain
