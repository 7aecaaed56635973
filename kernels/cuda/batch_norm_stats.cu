// The device kernels of batch_norm.cc: BatchNormalization's training outputs from cuDNN's batch
// statistics, with the reference's rule (population_variance, running_statistic: cudnn_params.h, shared
// with the CPU tests), and BatchNormalizationGrad with constant mean/var.
#include <cstdint>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cudnn_params.h"

namespace onnxtrain::cuda {
namespace {

// From cuDNN's batch mean and unbiased variance (exponentialAverageFactor 1) to the reference's outputs.
__global__ void batch_norm_running_stats(const float* batch_mean, const float* unbiased_var, const float* input_mean,
                                         const float* input_var, float* running_mean, float* running_var,
                                         float* saved_mean, float* saved_var, long long features, long long count,
                                         double momentum) {
  const long long f = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (f >= features) return;
  const double mean = batch_mean[f];
  const double var = population_variance(unbiased_var[f], count);
  if (running_mean) running_mean[f] = static_cast<float>(running_statistic(input_mean[f], mean, momentum));
  if (running_var) running_var[f] = static_cast<float>(running_statistic(input_var[f], var, momentum));
  if (saved_mean) saved_mean[f] = static_cast<float>(mean);
  if (saved_var) saved_var[f] = static_cast<float>(var);
}

// The grad with constant mean/var: per feature f (one block), dbias = Σ dy, dscale = Σ dy·x̂ and
// dx = scale·dy/√(var+ε). Sums in double, reduced in a fixed order (deterministic).
constexpr int kGradBlock = 256;
__global__ void batch_norm_grad_frozen(const float* dy, const float* x, const float* scale, const float* mean,
                                       const float* var, float* dx, float* dscale, float* dbias, long long batch,
                                       long long features, long long inner, double epsilon) {
  const long long f = blockIdx.x;
  const double inv_std = 1.0 / sqrt(static_cast<double>(var[f]) + epsilon);
  const double mu = mean[f];
  const double s = scale[f];
  double sum_dy = 0, sum_dy_xhat = 0;
  for (long long e = threadIdx.x; e < batch * inner; e += blockDim.x) {
    const long long n = e / inner, i = e % inner;
    const long long at = (n * features + f) * inner + i;
    const double g = dy[at];
    sum_dy += g;
    sum_dy_xhat += g * (static_cast<double>(x[at]) - mu) * inv_std;
    if (dx) dx[at] = static_cast<float>(s * inv_std * g);
  }
  __shared__ double shared_dy[kGradBlock], shared_xhat[kGradBlock];
  shared_dy[threadIdx.x] = sum_dy;
  shared_xhat[threadIdx.x] = sum_dy_xhat;
  __syncthreads();
  for (int half = kGradBlock / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      shared_dy[threadIdx.x] += shared_dy[threadIdx.x + half];
      shared_xhat[threadIdx.x] += shared_xhat[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    if (dbias) dbias[f] = static_cast<float>(shared_dy[0]);
    if (dscale) dscale[f] = static_cast<float>(shared_xhat[0]);
  }
}

}  // namespace

void launch_batch_norm_running_stats(const float* batch_mean, const float* unbiased_var, const float* input_mean,
                                     const float* input_var, float* running_mean, float* running_var, float* saved_mean,
                                     float* saved_var, int64_t features, int64_t count, double momentum,
                                     cudaStream_t stream) {
  batch_norm_running_stats<<<static_cast<unsigned>((features + 255) / 256), 256, 0, stream>>>(
      batch_mean, unbiased_var, input_mean, input_var, running_mean, running_var, saved_mean, saved_var, features,
      count, momentum);
  ONNXTRAIN_CUDA_CHECK_LAUNCH("batch_norm_running_stats");
}

void launch_batch_norm_grad_frozen(const float* dy, const float* x, const float* scale, const float* mean,
                                   const float* var, float* dx, float* dscale, float* dbias, int64_t batch,
                                   int64_t features, int64_t inner, double epsilon, cudaStream_t stream) {
  batch_norm_grad_frozen<<<static_cast<unsigned>(features), kGradBlock, 0, stream>>>(
      dy, x, scale, mean, var, dx, dscale, dbias, batch, features, inner, epsilon);
  ONNXTRAIN_CUDA_CHECK_LAUNCH("batch_norm_grad_frozen");
}

}  // namespace onnxtrain::cuda
