// Launchers of the CUDA LayerNormalization and InstanceNormalization kernels, forward and backward
// (layer_norm.cu), called by layer_norm.cc and instance_norm.cc. Both normalise rows of X independently
// with the row's mean and population variance (two passes, in double, as the reference):
//   LayerNormalization    rows = dims before `axis`, cols = the normalised dims; Scale/B per column
//                         (broadcast onto the normalised dims by scale_index/bias_index);
//   InstanceNormalization rows = N·C planes, cols = the plane; scale/B per row (row % channels).
// Enqueue on `stream`, never synchronise; float and double.
//
//   double* scratch = static_cast<double*>(cuda::workspace(stream, norm_grad_scratch_bytes(p)));
//   launch_norm_grad<float>(p, dy, x, scale, dx, dscale, dbias, scratch, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/reduce_geometry.h"

namespace onnxtrain::cuda {

struct NormParams {
  int64_t rows = 0, cols = 0;
  double epsilon = 1e-5;
  bool per_row_affine = false;  // InstanceNormalization: scale/bias of row r at r % channels
  int64_t channels = 1;
  BroadcastIndex scale_index, bias_index;  // LayerNormalization: column -> element of Scale / B
};

// Where the optional Mean and InvStdDev outputs go (LayerNormalization), each float or double.
struct NormStats {
  void* mean = nullptr;
  void* inv_std = nullptr;
  bool mean_double = false, inv_std_double = false;
};

// y = (x - mean)·inv_std·scale + bias per row; bias may be null (LayerNormalization without B).
template <typename T>
void launch_norm(const NormParams& p, const T* x, const T* scale, const T* bias, T* y, const NormStats& stats,
                 cudaStream_t stream);

// LayerNormalizationGrad's dScale/dBias sum the rows in chunks of kNormChunkRows (at most kNormMaxChunks
// chunks), in parallel, then add the chunks' partial sums in order.
inline constexpr int64_t kNormChunkRows = 256;
inline constexpr int64_t kNormMaxChunks = 256;
inline int64_t norm_column_chunks(const NormParams& p) {
  const int64_t chunks = (p.rows + kNormChunkRows - 1) / kNormChunkRows;
  return chunks < 1 ? 1 : chunks > kNormMaxChunks ? kNormMaxChunks : chunks;
}

// Device scratch (doubles) that launch_norm_grad needs: four per row, and the chunks' partial column sums.
inline size_t norm_grad_scratch_bytes(const NormParams& p) {
  const int64_t partials = p.per_row_affine ? 0 : 2 * norm_column_chunks(p) * p.cols;
  return static_cast<size_t>(4 * p.rows + partials + 1) * sizeof(double);
}

// With g = dy·scale: dx = inv_std·(g − mean(g) − x̂·mean(g·x̂)); dscale = Σ dy·x̂ and dbias = Σ dy over the
// rows (per column for LayerNormalization, per channel for InstanceNormalization). Each output may be null.
template <typename T>
void launch_norm_grad(const NormParams& p, const T* dy, const T* x, const T* scale, T* dx, T* dscale, T* dbias,
                      double* scratch, cudaStream_t stream);

}  // namespace onnxtrain::cuda

namespace onnxtrain {
class KernelRegistry;
// InstanceNormalization(+Grad) (instance_norm.cc); register_cuda_norm_kernels (layer_norm.cc) calls it.
void register_cuda_instance_norm_kernels(KernelRegistry& registry);
}  // namespace onnxtrain
