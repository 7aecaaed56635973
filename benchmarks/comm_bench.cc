// all_reduce_sum throughput of the process-crossing comm backends, in GB/s of payload (the bytes of
// the array reduced, per second): the MPI backend against MPI_Allreduce itself, and the TCP backend.
// Not a ctest; run it by hand:
//
//   mpirun --allow-run-as-root -np 2 build/tests/comm_bench            # MPI, MPI_Allreduce, TCP (2 processes)
//   build/tests/comm_bench                                            # TCP only, 2 ranks as threads
//
// Options: --sizes-mb 1,16,64  --port 29533 (TCP rendezvous under mpirun).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "executor/comm/launch.h"
#include "executor/comm/mpi_comm.h"
#include "executor/comm/tcp_comm.h"

using namespace onnxtrain;
using Clock = std::chrono::steady_clock;

namespace {

// Seconds per call: a warm-up call, then as many calls as fit in ~0.5 s (at least 3); the slowest rank's
// figure counts (each rank passes its own time through `max_over_ranks`).
double time_per_call(const std::function<void()>& call, const std::function<double(double)>& max_over_ranks,
                     std::size_t bytes) {
  call();
  const int iterations =
      static_cast<int>(std::clamp<std::size_t>((512u << 20) / std::max<std::size_t>(bytes, 1), 3, 200));
  const auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) call();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count() / iterations;
  return max_over_ranks(seconds);
}

std::vector<std::size_t> parse_sizes(const std::string& text) {
  std::vector<std::size_t> mb;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    mb.push_back(std::stoul(text.substr(at, comma - at)));
    at = comma + 1;
  }
  return mb;
}

double gbps(std::size_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes_mb{1, 16, 64};
  int port = 29533;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--sizes-mb")
      sizes_mb = parse_sizes(argv[i + 1]);
    else if (flag == "--port")
      port = std::stoi(argv[i + 1]);
  }
  const LaunchInfo launch = detect_launch();
  const auto timeout = std::chrono::seconds(120);
  try {
    if (launch.kind == LaunchInfo::Kind::mpi) {
      MpiCommunicator mpi(timeout);
      TcpCommunicator tcp(
          TcpRendezvous{.master_addr = "127.0.0.1", .master_port = port, .rank = mpi.rank(), .size = mpi.size()},
          timeout);
      const auto max_over_ranks = [](double s) {
        MPI_Allreduce(MPI_IN_PLACE, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        return s;
      };
      if (mpi.rank() == 0)
        std::printf("%d ranks (processes): all_reduce_sum GB/s of payload\n%8s %14s %14s %14s\n", mpi.size(), "MB",
                    "mpi backend", "MPI_Allreduce", "tcp backend");
      for (const std::size_t mb : sizes_mb) {
        const std::size_t bytes = mb << 20;
        std::vector<float> data(bytes / sizeof(float), 1.0f);
        const double ours = time_per_call([&] { mpi.all_reduce_sum(data, "bench"); }, max_over_ranks, bytes);
        const double reference = time_per_call(
            [&] {
              MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM,
                            MPI_COMM_WORLD);
            },
            max_over_ranks, bytes);
        const double over_tcp = time_per_call([&] { tcp.all_reduce_sum(data, "bench"); }, max_over_ranks, bytes);
        if (mpi.rank() == 0)
          std::printf("%8zu %14.2f %14.2f %14.2f\n", mb, gbps(bytes, ours), gbps(bytes, reference),
                      gbps(bytes, over_tcp));
      }
      return 0;
    }
    // No mpirun: the TCP backend with 2 ranks as threads of this process.
    std::printf("2 ranks (threads): TCP all_reduce_sum GB/s of payload\n%8s %14s\n", "MB", "tcp backend");
    for (const std::size_t mb : sizes_mb) {
      const std::size_t bytes = mb << 20;
      std::vector<double> seconds(2);
      std::vector<std::thread> threads;
      for (int r = 0; r < 2; ++r)
        threads.emplace_back([&, r] {
          TcpCommunicator tcp(TcpRendezvous{.master_addr = "127.0.0.1", .master_port = port, .rank = r, .size = 2},
                              timeout);
          std::vector<float> data(bytes / sizeof(float), 1.0f);
          seconds[static_cast<std::size_t>(r)] =
              time_per_call([&] { tcp.all_reduce_sum(data, "bench"); }, [](double s) { return s; }, bytes);
          tcp.barrier("done");
        });
      for (auto& t : threads) t.join();
      std::printf("%8zu %14.2f\n", mb, gbps(bytes, std::max(seconds[0], seconds[1])));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "comm_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
