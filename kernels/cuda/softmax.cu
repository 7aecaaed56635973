// CUDA kernels of Softmax/LogSoftmax and SoftmaxGrad/LogSoftmaxGrad (launchers in softmax_launch.h).
// With inner == 1 (the axis is the last dim, or the pre-13 2-D coercion) a row is contiguous: one group
// of threads per row (a warp for rows up to kWarpRow elements, the block beyond) reduces it cooperatively.
// Otherwise one thread per (outer, inner) column walks the axis: neighbouring threads read neighbouring
// addresses.
#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/reduce_block.cuh"
#include "kernels/cuda/softmax_launch.h"

namespace onnxtrain::cuda {
namespace {

constexpr int64_t kWarpRow = 1024;

template <typename T, bool Log, int G>
__global__ void __launch_bounds__(kReduceBlock)
    softmax_rows(int64_t rows, int64_t n, const T* __restrict__ x, T* __restrict__ y) {
  __shared__ double shared[kReduceWarps];
  const int lane = static_cast<int>(threadIdx.x) % G;
  const int per_block = kReduceBlock / G;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * per_block + static_cast<int>(threadIdx.x) / G; r < rows;
       r += static_cast<int64_t>(gridDim.x) * per_block) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    double m = -INFINITY;
    for (int64_t k = lane; k < n; k += G) m = fmax(m, static_cast<double>(xr[k]));
    m = group_max<G>(m, shared);
    double sum = 0;
    for (int64_t k = lane; k < n; k += G) sum += exp(static_cast<double>(xr[k]) - m);
    sum = group_sum<G>(sum, shared);
    const double log_sum = log(sum);
    for (int64_t k = lane; k < n; k += G) {
      const double shifted = static_cast<double>(xr[k]) - m;
      yr[k] = static_cast<T>(Log ? shifted - log_sum : exp(shifted) / sum);
    }
  }
}

template <typename T, bool Log>
__global__ void softmax_columns(AxisGeometry g, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t columns = g.outer * g.inner;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = c / g.inner, i = c - o * g.inner;
    const int64_t base = g.offset(o, 0, i);
    double m = -INFINITY;
    for (int64_t k = 0; k < g.n; ++k) m = fmax(m, static_cast<double>(x[base + k * g.inner]));
    double sum = 0;
    for (int64_t k = 0; k < g.n; ++k) sum += exp(static_cast<double>(x[base + k * g.inner]) - m);
    const double log_sum = log(sum);
    for (int64_t k = 0; k < g.n; ++k) {
      const double shifted = static_cast<double>(x[base + k * g.inner]) - m;
      y[base + k * g.inner] = static_cast<T>(Log ? shifted - log_sum : exp(shifted) / sum);
    }
  }
}

template <bool Log, typename T>
__device__ __forceinline__ double grad_term(T dy, T y) {
  return Log ? static_cast<double>(dy) : static_cast<double>(dy) * static_cast<double>(y);
}

template <bool Log, typename T>
__device__ __forceinline__ T grad_value(T dy, T y, double sum) {
  const double g = static_cast<double>(dy), v = static_cast<double>(y);
  return static_cast<T>(Log ? g - exp(v) * sum : v * (g - sum));
}

template <typename T, bool Log, int G>
__global__ void __launch_bounds__(kReduceBlock)
    softmax_grad_rows(int64_t rows, int64_t n, const T* __restrict__ dy, const T* __restrict__ y, T* __restrict__ dx) {
  __shared__ double shared[kReduceWarps];
  const int lane = static_cast<int>(threadIdx.x) % G;
  const int per_block = kReduceBlock / G;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * per_block + static_cast<int>(threadIdx.x) / G; r < rows;
       r += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t base = r * n;
    double sum = 0;
    for (int64_t k = lane; k < n; k += G) sum += grad_term<Log>(dy[base + k], y[base + k]);
    sum = group_sum<G>(sum, shared);
    for (int64_t k = lane; k < n; k += G) dx[base + k] = grad_value<Log>(dy[base + k], y[base + k], sum);
  }
}

template <typename T, bool Log>
__global__ void softmax_grad_columns(AxisGeometry g, const T* __restrict__ dy, const T* __restrict__ y,
                                     T* __restrict__ dx) {
  const int64_t columns = g.outer * g.inner;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = c / g.inner, i = c - o * g.inner;
    const int64_t base = g.offset(o, 0, i);
    double sum = 0;
    for (int64_t k = 0; k < g.n; ++k) sum += grad_term<Log>(dy[base + k * g.inner], y[base + k * g.inner]);
    for (int64_t k = 0; k < g.n; ++k) {
      const int64_t e = base + k * g.inner;
      dx[e] = grad_value<Log>(dy[e], y[e], sum);
    }
  }
}

template <typename T, bool Log>
void launch_forward(const AxisGeometry& g, const T* x, T* y, cudaStream_t stream) {
  if (g.inner == 1) {
    if (g.n > kWarpRow) {
      softmax_rows<T, Log, kReduceBlock><<<grid_blocks(g.outer), kReduceBlock, 0, stream>>>(g.outer, g.n, x, y);
    } else {
      const long long blocks = (g.outer + kReduceWarps - 1) / kReduceWarps;
      softmax_rows<T, Log, 32><<<grid_blocks(blocks), kReduceBlock, 0, stream>>>(g.outer, g.n, x, y);
    }
  } else {
    const long long blocks = (g.outer * g.inner + kReduceBlock - 1) / kReduceBlock;
    softmax_columns<T, Log><<<grid_blocks(blocks), kReduceBlock, 0, stream>>>(g, x, y);
  }
  ONNXTRAIN_CUDA_CHECK_LAUNCH((softmax_rows<T, Log, 32>));
}

template <typename T, bool Log>
void launch_backward(const AxisGeometry& g, const T* dy, const T* y, T* dx, cudaStream_t stream) {
  if (g.inner == 1) {
    if (g.n > kWarpRow) {
      softmax_grad_rows<T, Log, kReduceBlock>
          <<<grid_blocks(g.outer), kReduceBlock, 0, stream>>>(g.outer, g.n, dy, y, dx);
    } else {
      const long long blocks = (g.outer + kReduceWarps - 1) / kReduceWarps;
      softmax_grad_rows<T, Log, 32><<<grid_blocks(blocks), kReduceBlock, 0, stream>>>(g.outer, g.n, dy, y, dx);
    }
  } else {
    const long long blocks = (g.outer * g.inner + kReduceBlock - 1) / kReduceBlock;
    softmax_grad_columns<T, Log><<<grid_blocks(blocks), kReduceBlock, 0, stream>>>(g, dy, y, dx);
  }
  ONNXTRAIN_CUDA_CHECK_LAUNCH((softmax_grad_rows<T, Log, 32>));
}

}  // namespace

template <typename T>
void launch_softmax(bool log, const AxisGeometry& g, const T* x, T* y, cudaStream_t stream) {
  if (g.outer * g.n * g.inner == 0) return;
  if (log) {
    launch_forward<T, true>(g, x, y, stream);
  } else {
    launch_forward<T, false>(g, x, y, stream);
  }
}

template <typename T>
void launch_softmax_grad(bool log, const AxisGeometry& g, const T* dy, const T* y, T* dx, cudaStream_t stream) {
  if (g.outer * g.n * g.inner == 0) return;
  if (log) {
    launch_backward<T, true>(g, dy, y, dx, stream);
  } else {
    launch_backward<T, false>(g, dy, y, dx, stream);
  }
}

template void launch_softmax<float>(bool, const AxisGeometry&, const float*, float*, cudaStream_t);
template void launch_softmax<double>(bool, const AxisGeometry&, const double*, double*, cudaStream_t);
template void launch_softmax_grad<float>(bool, const AxisGeometry&, const float*, const float*, float*, cudaStream_t);
template void launch_softmax_grad<double>(bool, const AxisGeometry&, const double*, const double*, double*,
                                          cudaStream_t);

}  // namespace onnxtrain::cuda
