// CUDA kernels of Reduce* and ArgMax/ArgMin (launchers declared in reduce_launch.h). Each output element
// is folded by one group of threads: one thread when the outputs are contiguous in the input and many,
// a warp when it folds at most kWarpCount elements, the whole block otherwise; the group strides over
// the reduced elements (ReduceGeometry maps them to input offsets, no permutation) and combines its
// lanes with group_reduce.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/reduce_block.cuh"
#include "kernels/cuda/reduce_launch.h"

namespace onnxtrain::cuda {
namespace {

constexpr int64_t kWarpCount = 2048;      // above this many elements per output a whole block folds it
constexpr int64_t kThreadOutputs = 1024;  // outputs enough to give each its own thread

template <typename T, ReduceOp Op>
constexpr bool kDoubleAcc =
    std::is_floating_point_v<T> || Op == ReduceOp::L2 || Op == ReduceOp::LogSum || Op == ReduceOp::LogSumExp;

template <typename T, ReduceOp Op>
using AccOf = std::conditional_t<kDoubleAcc<T, Op>, double, int64_t>;

template <typename T, typename Acc, ReduceOp Op>
__device__ __forceinline__ Acc initial() {
  if constexpr (Op == ReduceOp::Prod) return 1;
  if constexpr (Op == ReduceOp::Max) {
    if constexpr (std::is_floating_point_v<Acc>)
      return -INFINITY;
    else
      return static_cast<Acc>(std::numeric_limits<T>::lowest());
  }
  if constexpr (Op == ReduceOp::Min) {
    if constexpr (std::is_floating_point_v<Acc>)
      return INFINITY;
    else
      return static_cast<Acc>(std::numeric_limits<T>::max());
  }
  return 0;
}

template <typename Acc>
__device__ __forceinline__ bool is_nan(Acc v) {
  if constexpr (std::is_floating_point_v<Acc>)
    return isnan(v);
  else
    return false;
}

// Max/Min where a NaN anywhere makes the result NaN, like the reference's sequential loop.
template <typename Acc, bool Max>
__device__ __forceinline__ Acc extreme(Acc a, Acc b) {
  if (is_nan(a)) return a;
  if (is_nan(b)) return b;
  return Max ? (b > a ? b : a) : (b < a ? b : a);
}

template <typename Acc, ReduceOp Op>
__device__ __forceinline__ Acc combine(Acc a, Acc b) {
  if constexpr (Op == ReduceOp::Max)
    return extreme<Acc, true>(a, b);
  else if constexpr (Op == ReduceOp::Min)
    return extreme<Acc, false>(a, b);
  else if constexpr (Op == ReduceOp::Prod) {
    if constexpr (std::is_floating_point_v<Acc>)
      return a * b;
    else
      return static_cast<Acc>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));  // wraps, no UB
  } else {
    if constexpr (std::is_floating_point_v<Acc>)
      return a + b;
    else
      return static_cast<Acc>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  }
}

template <typename Acc, ReduceOp Op>
__device__ __forceinline__ Acc map(Acc v, Acc shift) {
  if constexpr (Op == ReduceOp::L1)
    return v < 0 ? -v : v;
  else if constexpr (Op == ReduceOp::L2 || Op == ReduceOp::SumSquare)
    return v * v;
  else if constexpr (Op == ReduceOp::LogSumExp)
    return exp(v - shift);
  else
    return v;
}

template <typename T>
__device__ __forceinline__ T store_as(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {  // the reference's float_to_integer: NaN -> 0, saturating
    if (isnan(v)) return 0;
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

template <typename T, ReduceOp Op, int G>
__global__ void __launch_bounds__(kReduceBlock)
    reduce_kernel(ReduceGeometry g, const T* __restrict__ x, T* __restrict__ y) {
  using Acc = AccOf<T, Op>;
  __shared__ Acc shared[kReduceWarps];
  const int lane = static_cast<int>(threadIdx.x) % G;
  const int per_block = kReduceBlock / G;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * per_block + static_cast<int>(threadIdx.x) / G;
  const int64_t step = static_cast<int64_t>(gridDim.x) * per_block;
  for (int64_t o = first; o < g.out_numel; o += step) {  // uniform across the group
    const int64_t base = g.kept.offset(o);
    Acc shift = 0;
    if constexpr (Op == ReduceOp::LogSumExp) {
      Acc m = -INFINITY;
      for (int64_t r = lane; r < g.count; r += G) m = fmax(m, static_cast<Acc>(x[base + g.reduced.offset(r)]));
      m = group_reduce<G>(
          m, [](Acc a, Acc b) { return fmax(a, b); }, shared);
      shift = isfinite(m) ? m : 0;  // the reference's finite max (all -inf stays -inf, not NaN)
    }
    Acc acc = initial<T, Acc, Op>();
    for (int64_t r = lane; r < g.count; r += G)
      acc = combine<Acc, Op>(acc, map<Acc, Op>(static_cast<Acc>(x[base + g.reduced.offset(r)]), shift));
    acc = group_reduce<G>(
        acc, [](Acc a, Acc b) { return combine<Acc, Op>(a, b); }, shared);
    if (lane != 0) continue;
    if constexpr (std::is_floating_point_v<Acc>) {
      double result = acc;
      if constexpr (Op == ReduceOp::Mean) result /= static_cast<double>(g.count);
      if constexpr (Op == ReduceOp::L2) result = sqrt(result);
      if constexpr (Op == ReduceOp::LogSum) result = log(result);
      if constexpr (Op == ReduceOp::LogSumExp) result = shift + log(result);
      y[o] = store_as<T>(result);
    } else {
      if constexpr (Op == ReduceOp::Mean) acc = g.count == 0 ? 0 : acc / g.count;
      y[o] = static_cast<T>(acc);
    }
  }
}

template <typename T, ReduceOp Op>
void launch_op(const ReduceGeometry& g, const T* x, T* y, cudaStream_t stream) {
  const bool kept_inner = g.kept.rank > 0 && g.kept.strides[g.kept.rank - 1] == 1;
  if (kept_inner && g.out_numel >= kThreadOutputs) {
    // Neighbouring outputs are neighbouring inputs ((N, C) -> (C)): a thread per output, so that a warp's
    // loads of one reduced step are contiguous.
    const unsigned int blocks = grid_blocks((g.out_numel + kReduceBlock - 1) / kReduceBlock);
    reduce_kernel<T, Op, 1><<<blocks, kReduceBlock, 0, stream>>>(g, x, y);
  } else if (g.count > kWarpCount) {
    const unsigned int blocks = grid_blocks(g.out_numel);
    reduce_kernel<T, Op, kReduceBlock><<<blocks, kReduceBlock, 0, stream>>>(g, x, y);
  } else {
    const unsigned int blocks = grid_blocks((g.out_numel + kReduceWarps - 1) / kReduceWarps);
    reduce_kernel<T, Op, 32><<<blocks, kReduceBlock, 0, stream>>>(g, x, y);
  }
  ONNXTRAIN_CUDA_CHECK_LAUNCH((reduce_kernel<T, Op, 32>));
}

// --- ArgMax / ArgMin ---

template <typename T>
struct ArgCandidate {
  T value;
  int64_t index;  // -1: no candidate yet
};

template <typename T, bool IsMax>
__device__ __forceinline__ bool strictly_better(T v, T best) {
  return IsMax ? v > best : v < best;
}

template <typename T, bool IsMax>
__device__ __forceinline__ ArgCandidate<T> pick(ArgCandidate<T> a, ArgCandidate<T> b, bool select_last) {
  if (b.index < 0) return a;
  if (a.index < 0) return b;
  if (strictly_better<T, IsMax>(b.value, a.value)) return b;
  if (strictly_better<T, IsMax>(a.value, b.value)) return a;
  // equal values: the first or the last index
  return (select_last ? b.index > a.index : b.index < a.index) ? b : a;
}

// One warp per (outer, inner) position; lanes stride along the axis, skipping NaNs (which the
// reference's comparisons never pick), then the reference's rule for a NaN at k = 0.
template <typename T, bool IsMax>
__global__ void __launch_bounds__(kReduceBlock)
    arg_reduce_kernel(AxisGeometry g, bool select_last, const T* __restrict__ x, int64_t* __restrict__ y) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t positions = g.outer * g.inner;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kReduceWarps + static_cast<int>(threadIdx.x) / 32;
  for (int64_t p = first; p < positions; p += static_cast<int64_t>(gridDim.x) * kReduceWarps) {
    const int64_t o = p / g.inner, i = p - o * g.inner;
    ArgCandidate<T> best{T(0), -1};
    for (int64_t k = lane; k < g.n; k += 32) {
      const T v = x[g.offset(o, k, i)];
      if constexpr (std::is_floating_point_v<T>) {
        if (isnan(v)) continue;
      }
      best = pick<T, IsMax>(best, ArgCandidate<T>{v, k}, select_last);
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      ArgCandidate<T> other{__shfl_down_sync(0xffffffffu, best.value, offset),
                            __shfl_down_sync(0xffffffffu, best.index, offset)};
      best = pick<T, IsMax>(best, other, select_last);
    }
    if (lane != 0) continue;
    bool first_is_nan = false;
    if constexpr (std::is_floating_point_v<T>) first_is_nan = g.n > 0 && isnan(x[g.offset(o, 0, i)]);
    y[p] = first_is_nan || best.index < 0 ? 0 : best.index;
  }
}

}  // namespace

template <typename T>
void launch_reduce(ReduceOp op, const ReduceGeometry& g, const T* x, T* y, cudaStream_t stream) {
  if (g.out_numel == 0) return;
  switch (op) {
    case ReduceOp::Sum:
      return launch_op<T, ReduceOp::Sum>(g, x, y, stream);
    case ReduceOp::Mean:
      return launch_op<T, ReduceOp::Mean>(g, x, y, stream);
    case ReduceOp::Max:
      return launch_op<T, ReduceOp::Max>(g, x, y, stream);
    case ReduceOp::Min:
      return launch_op<T, ReduceOp::Min>(g, x, y, stream);
    case ReduceOp::Prod:
      return launch_op<T, ReduceOp::Prod>(g, x, y, stream);
    case ReduceOp::L1:
      return launch_op<T, ReduceOp::L1>(g, x, y, stream);
    case ReduceOp::L2:
      return launch_op<T, ReduceOp::L2>(g, x, y, stream);
    case ReduceOp::SumSquare:
      return launch_op<T, ReduceOp::SumSquare>(g, x, y, stream);
    case ReduceOp::LogSum:
      return launch_op<T, ReduceOp::LogSum>(g, x, y, stream);
    case ReduceOp::LogSumExp:
      return launch_op<T, ReduceOp::LogSumExp>(g, x, y, stream);
  }
}

template <typename T>
void launch_arg_reduce(bool is_max, bool select_last, const AxisGeometry& g, const T* x, int64_t* y,
                       cudaStream_t stream) {
  const int64_t positions = g.outer * g.inner;
  if (positions == 0) return;
  const unsigned int blocks = grid_blocks((positions + kReduceWarps - 1) / kReduceWarps);
  if (is_max) {
    arg_reduce_kernel<T, true><<<blocks, kReduceBlock, 0, stream>>>(g, select_last, x, y);
  } else {
    arg_reduce_kernel<T, false><<<blocks, kReduceBlock, 0, stream>>>(g, select_last, x, y);
  }
  ONNXTRAIN_CUDA_CHECK_LAUNCH((arg_reduce_kernel<T, true>));
}

#define ONNXTRAIN_INSTANTIATE_REDUCE(T)                                                        \
  template void launch_reduce<T>(ReduceOp, const ReduceGeometry&, const T*, T*, cudaStream_t); \
  template void launch_arg_reduce<T>(bool, bool, const AxisGeometry&, const T*, int64_t*, cudaStream_t);
ONNXTRAIN_INSTANTIATE_REDUCE(float)
ONNXTRAIN_INSTANTIATE_REDUCE(double)
ONNXTRAIN_INSTANTIATE_REDUCE(int32_t)
ONNXTRAIN_INSTANTIATE_REDUCE(int64_t)
#undef ONNXTRAIN_INSTANTIATE_REDUCE

}  // namespace onnxtrain::cuda
