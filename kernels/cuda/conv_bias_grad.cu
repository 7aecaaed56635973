// The channel sum of conv_bias_grad.h: one block per channel, a fixed-order tree over its threads
// (deterministic, as cuDNN's deterministic algorithms that conv_algorithms.h picks).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/conv_bias_grad.h"
#include "kernels/cuda/cuda_check.h"

namespace onnxtrain::cuda {
namespace {

constexpr int kBlock = 256;

template <typename Half>
__global__ void channel_sum(const Half* dy, Half* db, long long batch, long long channels, long long inner) {
  const long long c = blockIdx.x;
  float sum = 0.0f;
  for (long long e = threadIdx.x; e < batch * inner; e += blockDim.x) {
    const long long n = e / inner, i = e % inner;
    sum += static_cast<float>(dy[(n * channels + c) * inner + i]);
  }
  __shared__ float partial[kBlock];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[c] = Half(partial[0]);
}

}  // namespace

void launch_channel_sum_half(bool bfloat16, const void* dy, void* db, int64_t batch, int64_t channels, int64_t inner,
                             cudaStream_t stream) {
  if (channels <= 0) return;
  const dim3 grid(static_cast<unsigned>(channels)), block(kBlock);
  if (bfloat16) {
    channel_sum<<<grid, block, 0, stream>>>(static_cast<const __nv_bfloat16*>(dy), static_cast<__nv_bfloat16*>(db),
                                            batch, channels, inner);
  } else {
    channel_sum<<<grid, block, 0, stream>>>(static_cast<const __half*>(dy), static_cast<__half*>(db), batch, channels,
                                            inner);
  }
  ONNXTRAIN_CUDA_CHECK_LAUNCH("channel_sum");
}

}  // namespace onnxtrain::cuda
