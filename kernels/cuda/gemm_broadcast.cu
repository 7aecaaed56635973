// The one device kernel of gemm.cc: Gemm's C broadcast onto Y before cuBLAS adds beta times it.
#include <cstdint>

#include "kernels/cuda/cuda_context.h"

namespace onnxtrain::cuda {
namespace {

// y[i, j] = c[i·s0 + j·s1] over (m, n): C broadcast onto Y.
__global__ void broadcast_fill(float* y, const float* c, long long m, long long n, long long s0, long long s1) {
  const long long total = m * n;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long i = e / n, j = e % n;
    y[e] = c[i * s0 + j * s1];
  }
}

}  // namespace

void launch_gemm_broadcast_fill(float* y, const float* c, int64_t m, int64_t n, int64_t s0, int64_t s1,
                                cudaStream_t stream) {
  broadcast_fill<<<grid_for(m * n), 256, 0, stream>>>(y, c, m, n, s0, s1);
  ONNXTRAIN_CUDA_CHECK_LAUNCH("broadcast_fill");
}

}  // namespace onnxtrain::cuda
