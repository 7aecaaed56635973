// Device side of pooling.cc's direct kernels (cudnn_direct_pooling.h): one thread per output element
// (forward) or per input element (backward, a gather: deterministic, no atomics).
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cudnn_direct_pooling.h"

namespace onnxtrain::cuda {
namespace {

__global__ void direct_pool_forward(DirectPool p, const float* x, float* y, long long* indices) {
  const long long total = p.planes * p.out_plane;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long plane = e / p.out_plane, o = e % p.out_plane;
    long long winner = -1;
    y[e] = direct_pool_output(p, x + plane * p.in_plane, o, &winner);
    if (indices) indices[e] = direct_pool_index(p, plane, winner);
  }
}

__global__ void direct_pool_backward(DirectPool p, const float* x, const float* dy, float* dx) {
  const long long total = p.planes * p.in_plane;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long plane = e / p.in_plane, i = e % p.in_plane;
    dx[e] = direct_pool_grad(p, x ? x + plane * p.in_plane : nullptr, dy + plane * p.out_plane, i);
  }
}

__global__ void max_pool2d_winners(DirectPool p, const float* x, int* winners) {
  const long long total = p.planes * p.out_plane;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long plane = e / p.out_plane;
    winners[e] = max_pool2d_winner(p, x + plane * p.in_plane, static_cast<int>(e - plane * p.out_plane));
  }
}

__global__ void max_pool2d_backward(DirectPool p, const int* winners, const float* dy, float* dx) {
  const long long total = p.planes * p.in_plane;
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long plane = e / p.in_plane;
    dx[e] = max_pool2d_grad(p, winners + plane * p.out_plane, dy + plane * p.out_plane,
                            static_cast<int>(e - plane * p.in_plane));
  }
}

}  // namespace

void launch_direct_pool_forward(const DirectPool& p, const float* x, float* y, int64_t* indices, cudaStream_t stream) {
  direct_pool_forward<<<grid_for(p.planes * p.out_plane), 256, 0, stream>>>(p, x, y,
                                                                            reinterpret_cast<long long*>(indices));
  ONNXTRAIN_CUDA_CHECK_LAUNCH("direct_pool_forward");
}

void launch_direct_pool_backward(const DirectPool& p, const float* x, const float* dy, float* dx, cudaStream_t stream) {
  direct_pool_backward<<<grid_for(p.planes * p.in_plane), 256, 0, stream>>>(p, x, dy, dx);
  ONNXTRAIN_CUDA_CHECK_LAUNCH("direct_pool_backward");
}

void launch_max_pool2d_backward(const DirectPool& p, const float* x, const float* dy, float* dx, int* winners,
                                cudaStream_t stream) {
  max_pool2d_winners<<<grid_for(p.planes * p.out_plane), 256, 0, stream>>>(p, x, winners);
  ONNXTRAIN_CUDA_CHECK_LAUNCH("max_pool2d_winners");
  max_pool2d_backward<<<grid_for(p.planes * p.in_plane), 256, 0, stream>>>(p, winners, dy, dx);
  ONNXTRAIN_CUDA_CHECK_LAUNCH("max_pool2d_backward");
}

}  // namespace onnxtrain::cuda
