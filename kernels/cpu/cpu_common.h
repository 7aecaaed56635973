// What the "cpu" kernels share: onnxtrain's own vectorised, multi-threaded CPU code for the ops oneDNN
// has no primitive for (broadcasting elementwise math, data movement, reductions it lacks, losses). They
// sit between oneDNN (preferred where it has the primitive) and the plain-loop reference kernels (the test
// oracle, never the fast path). Loops run contiguous inner ranges the compiler vectorises (`#pragma omp
// simd`) and split outer ranges across OpenMP threads, like oneDNN itself.
//
//   registry.add(cpu_entry("Add", {DType::Float32}, &make_add));
//   parallel_for(rows, /*grain=*/1024 / cols + 1, [&](int64_t begin, int64_t end) { ... });
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "graph/op_schema.h"
#include "kernels/kernel.h"

namespace onnxtrain::cpu {

inline KernelEntry cpu_entry(std::string op_type, std::vector<DType> dtypes, KernelFactory factory) {
  return {.domain = "",
          .op_type = std::move(op_type),
          .device = DeviceKind::Cpu,
          .dtypes = std::move(dtypes),
          .implementation = "cpu",
          .factory = factory};
}

// An entry for one of onnxtrain's backward ops (domain ai.onnxtrain).
inline KernelEntry cpu_training_entry(std::string op_type, std::vector<DType> dtypes, KernelFactory factory) {
  KernelEntry entry = cpu_entry(std::move(op_type), std::move(dtypes), factory);
  entry.domain = kTrainingDomain;
  return entry;
}

// Runs fn(begin, end) over [0, n) in chunks of at least `grain` items on the OpenMP threads; inline when
// the work is too small to be worth waking them.
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, omp_get_max_threads());
  if (chunks <= 1) {
    fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = n * c / chunks;
    const int64_t end = n * (c + 1) / chunks;
    fn(begin, end);
  }
}

}  // namespace onnxtrain::cpu
