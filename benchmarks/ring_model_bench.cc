// The ring model of an all-reduce, checked on this machine (issue 7). Part (a) measures point-to-point
// loopback transfers between ranks 0 and 1 (ping-pong, one way = half the round trip) through onnxtrain's
// MpiCommunicator send/recv and through raw MPI_Send/MPI_Recv, 4 KB .. 64 MB, and fits
// t(n) = latency + n / bandwidth to each. Part (b) times MpiCommunicator::all_reduce_sum on gradient
// sizes of real models and prints it next to the ring model
//   t = 2(R-1)/R * bytes / bandwidth + 2(R-1) * latency
// (MpiCommunicator's fit), the ratio measured/model, and raw MPI_Allreduce for reference. Not a ctest:
//
//   mpirun --allow-run-as-root --oversubscribe -np 2 build/benchmarks/ring_model_bench
//   mpirun ... ring_model_bench --p2p-kb 4,64,1024,65536 --reduce-mb 0.2,46.8 --budget-ms 200
//
// --budget-ms bounds the time spent per size (at least 5 timed repetitions after 2 warm-ups). Every
// figure is the median over the repetitions (the machine is shared; the median ignores the stalls),
// and for all-reduces the slowest rank's median. The last lines, "fit: ..." and "allreduce: ...",
// are for scripts (benchmarks/dp_scaling.sh reads them).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "executor/comm/mpi_comm.h"
#include "graph/error.h"

using namespace onnxtrain;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<double> parse_list(const std::string& text, const std::string& flag) {
  std::vector<double> values;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const double v = std::stod(text.substr(at, comma - at));
    if (!(v > 0)) throw Error(flag + ": sizes must be positive, got '" + text + "'");
    values.push_back(v);
    at = comma + 1;
  }
  if (values.empty()) throw Error(flag + ": empty list");
  return values;
}

// Median seconds of `call` (2 warm-up calls, then repetitions until `budget` is spent, at least 5).
// The repetition count must be the same on every rank taking part, so it comes from rank 0.
double median_seconds(const std::function<void()>& call, double budget, MPI_Comm comm) {
  call();
  call();
  std::vector<double> times;
  const auto begin = Clock::now();
  int go = 1;
  while (go) {
    const auto start = Clock::now();
    call();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    go = times.size() < 5 || std::chrono::duration<double>(Clock::now() - begin).count() < budget;
    if (times.size() >= 2000) go = 0;
    MPI_Bcast(&go, 1, MPI_INT, 0, comm);  // rank 0 decides: every rank repeats equally often
  }
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

struct Fit {
  double latency = 0;    // seconds
  double bandwidth = 0;  // bytes per second
};

// Least squares of t = a + n*b weighted by 1/t^2 (relative errors): an unweighted fit would let the
// 64 MB point decide everything and leave the latency at the mercy of its noise.
Fit fit_latency_bandwidth(const std::vector<double>& bytes, const std::vector<double>& seconds) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const double w = 1 / (seconds[i] * seconds[i]);
    sw += w;
    sx += w * bytes[i];
    sy += w * seconds[i];
    sxx += w * bytes[i] * bytes[i];
    sxy += w * bytes[i] * seconds[i];
  }
  const double slope = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
  const double intercept = (sy - slope * sx) / sw;
  return {.latency = intercept, .bandwidth = 1 / slope};
}

double ring_model_seconds(double bytes, int ranks, const Fit& f) {
  return 2.0 * (ranks - 1) / ranks * bytes / f.bandwidth + 2.0 * (ranks - 1) * f.latency;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<double> p2p_kb{4, 16, 64, 256, 1024, 4096, 16384, 65536};
  // Gradient bytes per step of the fixtures and the zoo (the dp line's "MB per replica per step").
  std::vector<double> reduce_mb{0.2, 0.44, 4.9, 46.8};
  double budget = 0.2;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (i + 1 >= argc) throw Error("" + flag + " needs a value");
      if (flag == "--p2p-kb")
        p2p_kb = parse_list(argv[++i], flag);
      else if (flag == "--reduce-mb")
        reduce_mb = parse_list(argv[++i], flag);
      else if (flag == "--budget-ms")
        budget = std::stod(argv[++i]) / 1e3;
      else
        throw Error("unknown option " + flag + " (--p2p-kb LIST, --reduce-mb LIST, --budget-ms MS)");
    }

    MpiCommunicator comm(std::chrono::seconds(120));  // initialises MPI
    const int rank = comm.rank(), ranks = comm.size();
    if (ranks < 2) throw Error("start it with mpirun -np 2 (or more); got " + std::to_string(ranks) + " rank");
    // Ranks 0 and 1 ping-pong; the others wait on a communicator of their own so as not to disturb them.
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : 1, rank, &pair);

    if (rank == 0)
      std::printf(
          "%s\n%d ranks. (a) point-to-point ranks 0 <-> 1, one way (half a ping-pong round trip), median\n"
          "%10s %14s %10s %14s %10s\n",
          MpiCommunicator::library_version().substr(0, 60).c_str(), ranks, "KB", "comm us", "comm GB/s", "MPI_Send us",
          "GB/s");
    std::vector<double> bytes, comm_s, raw_s;
    int64_t message = 0;
    for (const double kb : p2p_kb) {
      const auto n = static_cast<int64_t>(std::llround(kb * 1024 / sizeof(float)));
      const double b = static_cast<double>(n) * sizeof(float);
      double ours = 0, raw = 0;
      if (rank < 2) {
        Tensor t(DType::Float32, {n});
        const int peer = 1 - rank;
        ours = median_seconds(
                   [&] {
                     const CommTag tag{.micro_batch = message++, .kind = CommTag::other};
                     if (rank == 0) {
                       comm.send(peer, tag, t, "ping");
                       t = comm.recv(peer, tag, "pong");
                     } else {
                       t = comm.recv(peer, tag, "ping");
                       comm.send(peer, tag, t, "pong");
                     }
                   },
                   budget, pair) /
               2;
        std::vector<float> buffer(static_cast<std::size_t>(n), 1.0f);
        raw = median_seconds(
                  [&] {
                    if (rank == 0) {
                      MPI_Send(buffer.data(), static_cast<int>(n), MPI_FLOAT, peer, 7, pair);
                      MPI_Recv(buffer.data(), static_cast<int>(n), MPI_FLOAT, peer, 7, pair, MPI_STATUS_IGNORE);
                    } else {
                      MPI_Recv(buffer.data(), static_cast<int>(n), MPI_FLOAT, peer, 7, pair, MPI_STATUS_IGNORE);
                      MPI_Send(buffer.data(), static_cast<int>(n), MPI_FLOAT, peer, 7, pair);
                    }
                  },
                  budget, pair) /
              2;
      }
      bytes.push_back(b);
      comm_s.push_back(ours);
      raw_s.push_back(raw);
      if (rank == 0)
        std::printf("%10.0f %14.1f %10.2f %14.1f %10.2f\n", kb, ours * 1e6, b / ours / 1e9, raw * 1e6, b / raw / 1e9);
      std::fflush(stdout);
    }
    // Every rank needs the fit for part (b); only rank 0's numbers are used.
    Fit ours{}, raw{};
    if (rank == 0) {
      ours = fit_latency_bandwidth(bytes, comm_s);
      raw = fit_latency_bandwidth(bytes, raw_s);
      std::printf(
          "fitted t = latency + bytes / bandwidth (weighted by 1/t^2):\n"
          "  MpiCommunicator send/recv: latency %.1f us, bandwidth %.2f GB/s\n"
          "  MPI_Send/MPI_Recv:         latency %.1f us, bandwidth %.2f GB/s\n",
          ours.latency * 1e6, ours.bandwidth / 1e9, raw.latency * 1e6, raw.bandwidth / 1e9);
    }
    MPI_Bcast(&ours, sizeof ours, MPI_BYTE, 0, MPI_COMM_WORLD);
    MPI_Bcast(&raw, sizeof raw, MPI_BYTE, 0, MPI_COMM_WORLD);

    if (rank == 0)
      std::printf(
          "(b) all_reduce_sum over %d ranks, slowest rank's median; model = 2(R-1)/R * bytes / bandwidth + "
          "2(R-1) * latency with the MpiCommunicator fit (and the MPI_Send fit)\n"
          "%10s %12s %12s %8s %14s %8s %14s\n",
          ranks, "MB", "measured ms", "model ms", "ratio", "raw-fit model", "ratio", "MPI_Allreduce");
    std::vector<double> reduce_ms, model_ms;
    for (const double mb : reduce_mb) {
      const auto n = static_cast<std::size_t>(std::llround(mb * 1e6 / sizeof(float)));
      const double b = static_cast<double>(n) * sizeof(float);
      std::vector<float> data(n, 1.0f / static_cast<float>(ranks));  // stays finite however often it is summed
      double measured = median_seconds([&] { comm.all_reduce_sum(data, "bench"); }, budget, MPI_COMM_WORLD);
      double reference = median_seconds(
          [&] { MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
          budget, MPI_COMM_WORLD);
      MPI_Allreduce(MPI_IN_PLACE, &measured, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      MPI_Allreduce(MPI_IN_PLACE, &reference, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      const double model = ring_model_seconds(b, ranks, ours), raw_model = ring_model_seconds(b, ranks, raw);
      reduce_ms.push_back(measured * 1e3);
      model_ms.push_back(model * 1e3);
      if (rank == 0)
        std::printf("%10.2f %12.3f %12.3f %8.2f %14.3f %8.2f %14.3f\n", mb, measured * 1e3, model * 1e3,
                    measured / model, raw_model * 1e3, measured / raw_model, reference * 1e3);
      std::fflush(stdout);
    }
    if (rank == 0) {
      std::printf(
          "fit: ranks=%d comm_latency_us=%.3f comm_bandwidth_GBps=%.4f mpi_latency_us=%.3f mpi_bandwidth_GBps=%.4f\n",
          ranks, ours.latency * 1e6, ours.bandwidth / 1e9, raw.latency * 1e6, raw.bandwidth / 1e9);
      for (std::size_t i = 0; i < reduce_mb.size(); ++i)
        std::printf("allreduce: mb=%g measured_ms=%.4f model_ms=%.4f\n", reduce_mb[i], reduce_ms[i], model_ms[i]);
    }
    MPI_Comm_free(&pair);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ring_model_bench: %s\n", e.what());
    return 1;
  }
}
