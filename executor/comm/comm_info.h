// Which communication backends this build has: `local` (threads in one process) and `tcp` (torchrun-style
// processes) always, `mpi` when built against MPI, `nccl` when built with CUDA and NCCL, each with the
// library version it reports.
// Nothing here initialises MPI or NCCL; it is safe to call anywhere (`onnxtrain --version`, tests).
//
//   for (const CommBackendInfo& b : comm_backends())
//     std::cout << b.name << (b.compiled ? " " + b.version : " (" + b.detail + ")") << "\n";
#pragma once

#include <string>
#include <vector>

namespace onnxtrain {

struct CommBackendInfo {
  std::string name;  // "local", "mpi", "nccl", "tcp"
  bool compiled = false;
  std::string version;  // "Open MPI v4.1.4, ...", "NCCL 2.28.9"; "" when not compiled
  std::string detail;   // what it is for, or why it is absent
};

// All four backends, in the order local, mpi, nccl, tcp; `compiled` says which this build has.
std::vector<CommBackendInfo> comm_backends();

// Names of the compiled backends: {"local", "mpi"}.
std::vector<std::string> compiled_comm_backend_names();

}  // namespace onnxtrain
