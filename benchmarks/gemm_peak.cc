// The machine's float32 GEMM peak as onnxtrain's own library reaches it: oneDNN's sgemm of two N x N
// matrices on OMP_NUM_THREADS threads, after two warm-up products, repeated for about SECONDS seconds.
// Prints one JSON line: {"gflops": 2 N^3 repetitions / seconds, "n", "repetitions", "seconds", "threads"}.
// benchmarks/compare_pytorch.py takes, per thread count, the best of this and torch.mm as "the peak":
// torch.mm alone (MKL) under-reads AMD hosts (2026-12-06, a 2-core AMD EPYC: torch.mm 87 and 154 GFLOP/s
// at 1 and 2 threads, this 108 and 213), and a network then ran at "162% of the peak".
//
//   OMP_NUM_THREADS=2 build/release/benchmarks/gemm_peak 2048 1.0
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dnnl.hpp>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 2048;
  const double seconds = argc > 2 ? std::strtod(argv[2], nullptr) : 1.0;
  if (n < 1 || n > 16384 || !(seconds > 0)) {
    std::fprintf(stderr, "usage: gemm_peak [N (1-16384, default 2048)] [SECONDS (> 0, default 1)]\n");
    return 2;
  }
  // Values away from 0 and denormals, as torch.randn's are: the timing does not depend on them.
  std::vector<float> a(static_cast<size_t>(n * n), 0.5f), b(static_cast<size_t>(n * n), 0.25f),
      c(static_cast<size_t>(n * n));
  const auto product = [&] {
    if (dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n) != dnnl_success) {
      std::fprintf(stderr, "gemm_peak: dnnl_sgemm failed\n");
      std::exit(1);
    }
  };
  product();
  product();
  long repetitions = 0;
  double elapsed = 0;
  const auto start = std::chrono::steady_clock::now();
  while (elapsed < seconds) {
    product();
    ++repetitions;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::printf("{\"gflops\": %.3f, \"n\": %ld, \"repetitions\": %ld, \"seconds\": %.6f, \"threads\": %d}\n",
              2.0 * static_cast<double>(n) * n * n * repetitions / elapsed / 1e9, n, repetitions, elapsed,
              omp_get_max_threads());
  return 0;
}
