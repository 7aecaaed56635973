// "cpu" kernels of ArgMax/ArgMin, float32 in, int64 out, over (outer, n, inner) views of the input.
//   inner == 1: each row is one contiguous scan in SIMD lanes that keep a best value and its index.
//   inner  > 1: tiles of the inner columns keep the best value and index per column, updated row by row
//               with branch-free selects (float and int32 lanes of the same width).
// Ties and NaN follow the reference exactly: an element replaces the best only when strictly better (or
// equal, with select_last_index), so a NaN never wins unless it is the first element, where it stays.
#include <limits>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/reduce_clones.h"
#include "kernels/onednn/reference_fallback.h"
#include "kernels/reference/kernel_plumbing.h"
#include "kernels/reference/reduce_axes.h"

namespace onnxtrain {
namespace {

using namespace reference;
using cpu::parallel_for;

constexpr int kArgLanes = 16;
constexpr int64_t kArgTile = 256;

template <bool IsMax>
inline bool better(float v, float best) {
  return IsMax ? v > best : v < best;
}

// The reference's answer for one contiguous row of n >= 1 elements, in one pass: each of kArgLanes lanes keeps
// its best value and that value's first (last) index; a lane still holding NaN takes any element. Then the
// best lane wins, ties going to the lower (higher) index, and the tail is scanned in order.
template <bool IsMax>
ONNXTRAIN_REDUCE_CLONES int64_t arg_of_row(const float* x, int64_t n, bool last) {
  if (x[0] != x[0]) return 0;  // a NaN first element is never replaced
  float best = x[0];
  int64_t at = 0, i = 0;
  if (n >= 2 * kArgLanes) {
    float lane_best[kArgLanes];
    int32_t lane_at[kArgLanes];
    for (int j = 0; j < kArgLanes; ++j) {
      lane_best[j] = x[j];
      lane_at[j] = j;
    }
    for (i = kArgLanes; i + kArgLanes <= n; i += kArgLanes) {
      const auto base = static_cast<int32_t>(i);
      if (last) {
#pragma omp simd
        for (int j = 0; j < kArgLanes; ++j) {
          const float v = x[i + j];
          const bool take = better<IsMax>(v, lane_best[j]) | (v == lane_best[j]) | (lane_best[j] != lane_best[j]);
          lane_best[j] = take ? v : lane_best[j];
          lane_at[j] = take ? base + j : lane_at[j];
        }
      } else {
#pragma omp simd
        for (int j = 0; j < kArgLanes; ++j) {
          const float v = x[i + j];
          const bool take = better<IsMax>(v, lane_best[j]) | (lane_best[j] != lane_best[j]);
          lane_best[j] = take ? v : lane_best[j];
          lane_at[j] = take ? base + j : lane_at[j];
        }
      }
    }
    for (int j = 0; j < kArgLanes; ++j) {
      const float v = lane_best[j];
      if (v != v) continue;
      if (better<IsMax>(v, best) || (v == best && (last ? lane_at[j] > at : lane_at[j] < at))) {
        best = v;
        at = lane_at[j];
      }
    }
  } else {
    i = 1;
  }
  for (; i < n; ++i) {
    if (better<IsMax>(x[i], best) || (last && x[i] == best)) {
      best = x[i];
      at = i;
    }
  }
  return at;
}

// Columns [0, cols) of rows x + k·inner, k in [0, n): the best index per column into y.
template <bool IsMax>
ONNXTRAIN_REDUCE_CLONES void arg_of_columns(const float* x, int64_t n, int64_t inner, int64_t cols, bool last,
                                            int64_t* y) {
  float best[kArgTile];
  int32_t index[kArgTile];
  for (int64_t j = 0; j < cols; ++j) {
    best[j] = x[j];
    index[j] = 0;
  }
  for (int64_t k = 1; k < n; ++k) {
    const float* row = x + k * inner;
    const auto kk = static_cast<int32_t>(k);
    if (last) {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) {
        const bool take = better<IsMax>(row[j], best[j]) | (row[j] == best[j]);
        best[j] = take ? row[j] : best[j];
        index[j] = take ? kk : index[j];
      }
    } else {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) {
        // "& (v == v)" changes nothing (a NaN is never better) but keeps the select branch-free: GCC
        // turns a select on one float compare into control flow here.
        const bool take = better<IsMax>(row[j], best[j]) & (row[j] == row[j]);
        best[j] = take ? row[j] : best[j];
        index[j] = take ? kk : index[j];
      }
    }
  }
  for (int64_t j = 0; j < cols; ++j) y[j] = index[j];
}

template <bool IsMax>
std::unique_ptr<Kernel> make_arg_reduce(const KernelSpec& spec) {
  const ArgReduceAxis a = read_arg_reduce(spec, {DType::Float32});
  const int64_t outer = a.outer, inner = a.inner, n = a.n;
  if (n == 0 || outer * inner == 0 || n > std::numeric_limits<int32_t>::max()) return onednn::reference_kernel(spec);
  const bool last = a.select_last;
  return make_closure_kernel([outer, inner, n, last](auto inputs, auto outputs) {
    const float* x = inputs[0].template as<float>();
    auto* y = outputs[0].template as<int64_t>();
    if (inner == 1) {
      parallel_for(outer, 16384 / n + 1, [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) y[o] = arg_of_row<IsMax>(x + o * n, n, last);
      });
      return;
    }
    const int64_t tiles = (inner + kArgTile - 1) / kArgTile;
    parallel_for(outer * tiles, 16384 / (n * std::min(inner, kArgTile)) + 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t o = t / tiles, j0 = (t % tiles) * kArgTile;
        arg_of_columns<IsMax>(x + o * n * inner + j0, n, inner, std::min(kArgTile, inner - j0), last,
                              y + o * inner + j0);
      }
    });
  });
}

}  // namespace

void register_cpu_arg_reduce_kernels(KernelRegistry& registry) {
  registry.add(cpu::cpu_entry("ArgMax", {DType::Float32}, &make_arg_reduce<true>));
  registry.add(cpu::cpu_entry("ArgMin", {DType::Float32}, &make_arg_reduce<false>));
}

}  // namespace onnxtrain
