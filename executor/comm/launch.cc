#include "executor/comm/launch.h"

#include <charconv>
#include <cstdlib>

#include "executor/comm/local_comm.h"
#include "executor/comm/tcp_comm.h"
#include "graph/error.h"
#if ONNXTRAIN_HAVE_MPI
#include "executor/comm/mpi_comm.h"
#endif

namespace onnxtrain {
namespace {

using Env = std::function<const char*(const char*)>;

std::optional<std::string> lookup(const Env& env, const char* name) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

int parse_int(const std::string& value, const char* name, const char* launcher) {
  int out = 0;
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (ec == std::errc::result_out_of_range && ptr == end)
    throw Error(std::string(launcher) + " environment: " + name + "='" + value + "' is out of range");
  if (ec != std::errc() || ptr != end)
    throw Error(std::string(launcher) + " environment: " + name + "='" + value + "' is not an integer");
  return out;
}

// The rank, size and local rank an MPI launcher set, if one did.
std::optional<LaunchInfo> detect_mpi(const Env& env) {
  struct Source {
    const char* rank;
    const char* size;
    const char* local_rank;
  };
  // Open MPI, then PMIx (Open MPI 5, Slurm's PMIx) with Open MPI's or PMI's size, then MPICH / Intel MPI.
  const Source sources[] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"PMIX_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
  };
  for (const Source& s : sources) {
    const auto rank = lookup(env, s.rank);
    if (!rank) continue;
    const auto size = lookup(env, s.size);
    if (!size) continue;
    LaunchInfo info;
    info.kind = LaunchInfo::Kind::mpi;
    info.source = s.rank;
    info.rank = parse_int(*rank, s.rank, "MPI launcher");
    info.size = parse_int(*size, s.size, "MPI launcher");
    if (const auto local = lookup(env, s.local_rank)) info.local_rank = parse_int(*local, s.local_rank, "MPI launcher");
    if (info.size < 1)
      throw Error(std::string("MPI launcher environment: ") + s.size + "=" + *size + " must be at least 1");
    if (info.rank < 0 || info.rank >= info.size)
      throw Error(std::string("MPI launcher environment: ") + s.rank + "=" + *rank + " is outside 0.." +
                  std::to_string(info.size - 1) + " (" + s.size + "=" + *size + ")");
    return info;
  }
  // A rank without any size variable is a launcher this code does not know.
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (lookup(env, name))
      throw Error(std::string("MPI launcher environment: ") + name +
                  " is set but no world size is (OMPI_COMM_WORLD_SIZE or PMI_SIZE)");
  return std::nullopt;
}

std::optional<LaunchInfo> detect_torchrun(const Env& env) {
  constexpr const char* names[] = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
  std::vector<const char*> present, missing;
  for (const char* n : names) (lookup(env, n) ? present : missing).push_back(n);
  if (present.empty()) return std::nullopt;
  if (!missing.empty()) {
    std::string have, lack;
    for (const char* n : present) have += (have.empty() ? "" : ", ") + std::string(n);
    for (const char* n : missing) lack += (lack.empty() ? "" : ", ") + std::string(n);
    throw Error("torchrun environment: " + have + (present.size() == 1 ? " is" : " are") + " set but " + lack +
                (missing.size() == 1 ? " is" : " are") +
                " missing; set all of RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (LOCAL_RANK optional)");
  }
  LaunchInfo info;
  info.kind = LaunchInfo::Kind::torchrun;
  info.source = "RANK";
  info.rank = parse_int(*lookup(env, "RANK"), "RANK", "torchrun");
  info.size = parse_int(*lookup(env, "WORLD_SIZE"), "WORLD_SIZE", "torchrun");
  info.local_rank = info.rank;
  if (const auto local = lookup(env, "LOCAL_RANK")) info.local_rank = parse_int(*local, "LOCAL_RANK", "torchrun");
  info.master_addr = *lookup(env, "MASTER_ADDR");
  info.master_port = parse_int(*lookup(env, "MASTER_PORT"), "MASTER_PORT", "torchrun");
  if (info.size < 1)
    throw Error("torchrun environment: WORLD_SIZE=" + std::to_string(info.size) + " must be at least 1");
  if (info.rank < 0 || info.rank >= info.size)
    throw Error("torchrun environment: RANK=" + std::to_string(info.rank) + " is outside 0.." +
                std::to_string(info.size - 1) + " (WORLD_SIZE=" + std::to_string(info.size) + ")");
  if (info.local_rank < 0)
    throw Error("torchrun environment: LOCAL_RANK=" + std::to_string(info.local_rank) + " is negative");
  if (info.master_port < 1 || info.master_port > 65535)
    throw Error("torchrun environment: MASTER_PORT=" + std::to_string(info.master_port) + " is outside 1..65535");
  return info;
}

}  // namespace

const char* launch_kind_name(LaunchInfo::Kind kind) {
  switch (kind) {
    case LaunchInfo::Kind::direct:
      return "direct";
    case LaunchInfo::Kind::mpi:
      return "mpi";
    case LaunchInfo::Kind::torchrun:
      return "torchrun";
  }
  return "?";
}

LaunchInfo detect_launch(const std::function<const char*(const char*)>& getenv) {
  if (auto mpi = detect_mpi(getenv)) return *mpi;
  if (auto torchrun = detect_torchrun(getenv)) return *torchrun;
  return LaunchInfo{};
}

LaunchInfo detect_launch() {
  return detect_launch([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

std::unique_ptr<Communicator> make_world_communicator(const LaunchInfo& launch, std::chrono::milliseconds timeout) {
  switch (launch.kind) {
    case LaunchInfo::Kind::direct:
      return std::move(make_local_group(1, timeout)[0]);
    case LaunchInfo::Kind::torchrun:
      return std::make_unique<TcpCommunicator>(TcpRendezvous{.master_addr = launch.master_addr,
                                                             .master_port = launch.master_port,
                                                             .rank = launch.rank,
                                                             .size = launch.size},
                                               timeout);
    case LaunchInfo::Kind::mpi:
#if ONNXTRAIN_HAVE_MPI
      return std::make_unique<MpiCommunicator>(timeout);
#else
      throw Error("this process was started by an MPI launcher (" + launch.source +
                  " is set) but this onnxtrain "
                  "was built without MPI; rebuild with -DONNXTRAIN_MPI=ON (install libopenmpi-dev), or start it "
                  "with torchrun-style RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT instead");
#endif
  }
  throw Error("unknown launch kind");
}

}  // namespace onnxtrain
