// CUDA kernels of LayerNormalization and InstanceNormalization, forward and backward (launchers in
// norm_launch.h): both are "normalise each row" with the affine parameters per column (layer) or per
// row (instance). One group of threads per row (a warp up to kWarpCols columns, the block beyond) takes
// the mean and variance in two passes in double. The backward's per-column parameter sums
// (LayerNormalization's dScale/dBias) run in 32-column tiles × chunks of rows, 8 row slices each, the
// partial sums combined in a fixed order; the per-channel ones (InstanceNormalization) add the rows' sums.
#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/norm_launch.h"
#include "kernels/cuda/reduce_block.cuh"

namespace onnxtrain::cuda {
namespace {

constexpr int64_t kWarpCols = 1024;

__device__ __forceinline__ int64_t scale_at(const NormParams& p, int64_t row, int64_t col) {
  return p.per_row_affine ? row % p.channels : p.scale_index(col);
}
__device__ __forceinline__ int64_t bias_at(const NormParams& p, int64_t row, int64_t col) {
  return p.per_row_affine ? row % p.channels : p.bias_index(col);
}

__device__ __forceinline__ void store_stat(void* out, bool is_double, int64_t i, double v) {
  if (is_double) {
    static_cast<double*>(out)[i] = v;
  } else {
    static_cast<float*>(out)[i] = static_cast<float>(v);
  }
}

// The row's mean and 1/sqrt(population variance + epsilon), on every thread of the group.
template <int G, typename T>
__device__ __forceinline__ void row_moments(const T* xr, int64_t cols, double epsilon, int lane, double* shared,
                                            double& mean, double& inv_std) {
  double sum = 0;
  for (int64_t i = lane; i < cols; i += G) sum += static_cast<double>(xr[i]);
  mean = group_sum<G>(sum, shared) / static_cast<double>(cols);
  double squares = 0;
  for (int64_t i = lane; i < cols; i += G) {
    const double d = static_cast<double>(xr[i]) - mean;
    squares += d * d;
  }
  inv_std = 1.0 / sqrt(group_sum<G>(squares, shared) / static_cast<double>(cols) + epsilon);
}

template <typename T, int G>
__global__ void __launch_bounds__(kReduceBlock)
    norm_rows(NormParams p, const T* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ bias,
              T* __restrict__ y, NormStats stats) {
  __shared__ double shared[kReduceWarps];
  const int lane = static_cast<int>(threadIdx.x) % G;
  const int per_block = kReduceBlock / G;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * per_block + static_cast<int>(threadIdx.x) / G; r < p.rows;
       r += static_cast<int64_t>(gridDim.x) * per_block) {
    const T* xr = x + r * p.cols;
    double mean, inv_std;
    row_moments<G>(xr, p.cols, p.epsilon, lane, shared, mean, inv_std);
    for (int64_t i = lane; i < p.cols; i += G) {
      double v = (static_cast<double>(xr[i]) - mean) * inv_std * static_cast<double>(scale[scale_at(p, r, i)]);
      if (bias) v += static_cast<double>(bias[bias_at(p, r, i)]);
      y[r * p.cols + i] = static_cast<T>(v);
    }
    if (lane == 0 && stats.mean) store_stat(stats.mean, stats.mean_double, r, mean);
    if (lane == 0 && stats.inv_std) store_stat(stats.inv_std, stats.inv_std_double, r, inv_std);
  }
}

// dx per row, and the row's mean, inv_std, Σ g and Σ g·x̂ into scratch (4 × rows doubles).
template <typename T, int G>
__global__ void __launch_bounds__(kReduceBlock)
    norm_grad_rows(NormParams p, const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ scale,
                   T* __restrict__ dx, double* __restrict__ scratch) {
  __shared__ double shared[kReduceWarps];
  const int lane = static_cast<int>(threadIdx.x) % G;
  const int per_block = kReduceBlock / G;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * per_block + static_cast<int>(threadIdx.x) / G; r < p.rows;
       r += static_cast<int64_t>(gridDim.x) * per_block) {
    const T* xr = x + r * p.cols;
    const T* dyr = dy + r * p.cols;
    double mean, inv_std;
    row_moments<G>(xr, p.cols, p.epsilon, lane, shared, mean, inv_std);
    // g = dy·Scale per column (layer); per row the scale is a common factor, applied at the end (instance).
    auto g_at = [&](int64_t i) {
      const double d = static_cast<double>(dyr[i]);
      return p.per_row_affine ? d : d * static_cast<double>(scale[p.scale_index(i)]);
    };
    double sum_g = 0, sum_gx = 0;
    for (int64_t i = lane; i < p.cols; i += G) {
      const double gi = g_at(i);
      sum_g += gi;
      sum_gx += gi * (static_cast<double>(xr[i]) - mean) * inv_std;
    }
    sum_g = group_sum<G>(sum_g, shared);
    sum_gx = group_sum<G>(sum_gx, shared);
    if (dx) {
      const double factor = inv_std * (p.per_row_affine ? static_cast<double>(scale[r % p.channels]) : 1.0);
      const double count = static_cast<double>(p.cols);
      for (int64_t i = lane; i < p.cols; i += G) {
        const double xhat = (static_cast<double>(xr[i]) - mean) * inv_std;
        dx[r * p.cols + i] = static_cast<T>(factor * (g_at(i) - (sum_g + xhat * sum_gx) / count));
      }
    }
    if (lane == 0) {
      scratch[r] = mean;
      scratch[p.rows + r] = inv_std;
      scratch[2 * p.rows + r] = sum_g;   // instance: Σ dy
      scratch[3 * p.rows + r] = sum_gx;  // instance: Σ dy·x̂
    }
  }
}

// LayerNormalization's dScale[i] = Σ_r dy·x̂ and dBias[i] = Σ_r dy, first per chunk of rows
// (blockIdx.y): a block of 32 columns × 8 row slices, the slices added in order into the chunk's partials.
template <typename T>
__global__ void __launch_bounds__(kReduceBlock)
    norm_grad_column_chunks(NormParams p, int64_t chunks, const T* __restrict__ dy, const T* __restrict__ x,
                            double* __restrict__ scratch) {
  constexpr int kSlices = kReduceBlock / 32;
  __shared__ double part_scale[kSlices][32], part_bias[kSlices][32];
  const int tx = static_cast<int>(threadIdx.x) % 32, slice = static_cast<int>(threadIdx.x) / 32;
  const int64_t chunk = blockIdx.y;
  const int64_t rows_per_chunk = (p.rows + chunks - 1) / chunks;
  const int64_t row_begin = chunk * rows_per_chunk;
  const int64_t row_end = row_begin + rows_per_chunk < p.rows ? row_begin + rows_per_chunk : p.rows;
  const double* mean = scratch;
  const double* inv_std = scratch + p.rows;
  double* partial_scale = scratch + 4 * p.rows;
  double* partial_bias = partial_scale + chunks * p.cols;
  for (int64_t tile = blockIdx.x; tile * 32 < p.cols; tile += gridDim.x) {  // uniform across the block
    const int64_t i = tile * 32 + tx;
    double s = 0, b = 0;
    if (i < p.cols) {
      for (int64_t r = row_begin + slice; r < row_end; r += kSlices) {
        const double d = static_cast<double>(dy[r * p.cols + i]);
        s += d * (static_cast<double>(x[r * p.cols + i]) - mean[r]) * inv_std[r];
        b += d;
      }
    }
    __syncthreads();  // the previous tile's readers are done
    part_scale[slice][tx] = s;
    part_bias[slice][tx] = b;
    __syncthreads();
    if (slice == 0 && i < p.cols) {
      for (int k = 1; k < kSlices; ++k) {
        s += part_scale[k][tx];
        b += part_bias[k][tx];
      }
      partial_scale[chunk * p.cols + i] = s;
      partial_bias[chunk * p.cols + i] = b;
    }
  }
}

// The chunks' partial sums added in chunk order, one thread per column.
template <typename T>
__global__ void norm_grad_columns(NormParams p, int64_t chunks, const double* __restrict__ scratch,
                                  T* __restrict__ dscale, T* __restrict__ dbias) {
  const double* partial_scale = scratch + 4 * p.rows;
  const double* partial_bias = partial_scale + chunks * p.cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.cols;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double s = 0, b = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      s += partial_scale[c * p.cols + i];
      b += partial_bias[c * p.cols + i];
    }
    if (dscale) dscale[i] = static_cast<T>(s);
    if (dbias) dbias[i] = static_cast<T>(b);
  }
}

// InstanceNormalization's dScale[c] and dBias[c]: the rows' Σ dy·x̂ and Σ dy added over the batch.
template <typename T>
__global__ void norm_grad_channels(NormParams p, const double* __restrict__ scratch, T* __restrict__ dscale,
                                   T* __restrict__ dbias) {
  const int64_t batch = p.rows / p.channels;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < p.channels;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double s = 0, b = 0;
    for (int64_t n = 0; n < batch; ++n) {
      b += scratch[2 * p.rows + n * p.channels + c];
      s += scratch[3 * p.rows + n * p.channels + c];
    }
    if (dscale) dscale[c] = static_cast<T>(s);
    if (dbias) dbias[c] = static_cast<T>(b);
  }
}

template <typename T>
__global__ void fill_zero(int64_t count, T* __restrict__ out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = T(0);
}

}  // namespace

template <typename T>
void launch_norm(const NormParams& p, const T* x, const T* scale, const T* bias, T* y, const NormStats& stats,
                 cudaStream_t stream) {
  // Rows of no columns still run: their Mean and InvStdDev are 0/0 = NaN, as the reference writes them.
  if (p.rows == 0) return;
  if (p.cols > kWarpCols) {
    norm_rows<T, kReduceBlock><<<grid_blocks(p.rows), kReduceBlock, 0, stream>>>(p, x, scale, bias, y, stats);
  } else {
    const long long blocks = (p.rows + kReduceWarps - 1) / kReduceWarps;
    norm_rows<T, 32><<<grid_blocks(blocks), kReduceBlock, 0, stream>>>(p, x, scale, bias, y, stats);
  }
  ONNXTRAIN_CUDA_CHECK_LAUNCH((norm_rows<T, 32>));
}

template <typename T>
void launch_norm_grad(const NormParams& p, const T* dy, const T* x, const T* scale, T* dx, T* dscale, T* dbias,
                      double* scratch, cudaStream_t stream) {
  const int64_t params = p.per_row_affine ? p.channels : p.cols;
  if (p.rows == 0 || p.cols == 0) {
    // No rows: the parameter gradients are empty sums. (The reference divides 0/0 for a zero-size row.)
    for (T* out : {dscale, dbias}) {
      if (!out || params == 0) continue;
      fill_zero<T><<<grid_blocks((params + kReduceBlock - 1) / kReduceBlock), kReduceBlock, 0, stream>>>(params, out);
      ONNXTRAIN_CUDA_CHECK_LAUNCH(fill_zero<T>);
    }
    return;
  }
  if (p.cols > kWarpCols) {
    norm_grad_rows<T, kReduceBlock><<<grid_blocks(p.rows), kReduceBlock, 0, stream>>>(p, dy, x, scale, dx, scratch);
  } else {
    const long long blocks = (p.rows + kReduceWarps - 1) / kReduceWarps;
    norm_grad_rows<T, 32><<<grid_blocks(blocks), kReduceBlock, 0, stream>>>(p, dy, x, scale, dx, scratch);
  }
  ONNXTRAIN_CUDA_CHECK_LAUNCH((norm_grad_rows<T, 32>));
  if (!dscale && !dbias) return;
  if (p.per_row_affine) {
    norm_grad_channels<T><<<grid_blocks((p.channels + kReduceBlock - 1) / kReduceBlock), kReduceBlock, 0, stream>>>(
        p, scratch, dscale, dbias);
    ONNXTRAIN_CUDA_CHECK_LAUNCH(norm_grad_channels<T>);
  } else {
    const int64_t chunks = norm_column_chunks(p);
    const dim3 grid(grid_blocks((p.cols + 31) / 32), static_cast<unsigned int>(chunks));
    norm_grad_column_chunks<T><<<grid, kReduceBlock, 0, stream>>>(p, chunks, dy, x, scratch);
    ONNXTRAIN_CUDA_CHECK_LAUNCH(norm_grad_column_chunks<T>);
    norm_grad_columns<T><<<grid_blocks((p.cols + kReduceBlock - 1) / kReduceBlock), kReduceBlock, 0, stream>>>(
        p, chunks, scratch, dscale, dbias);
    ONNXTRAIN_CUDA_CHECK_LAUNCH(norm_grad_columns<T>);
  }
}

template void launch_norm<float>(const NormParams&, const float*, const float*, const float*, float*, const NormStats&,
                                 cudaStream_t);
template void launch_norm<double>(const NormParams&, const double*, const double*, const double*, double*,
                                  const NormStats&, cudaStream_t);
template void launch_norm_grad<float>(const NormParams&, const float*, const float*, const float*, float*, float*,
                                      float*, double*, cudaStream_t);
template void launch_norm_grad<double>(const NormParams&, const double*, const double*, const double*, double*, double*,
                                       double*, double*, cudaStream_t);

}  // namespace onnxtrain::cuda
