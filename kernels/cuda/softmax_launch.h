// Launchers of the CUDA Softmax/LogSoftmax kernels and their ai.onnxtrain grads (softmax.cu), called by
// softmax.cc. The tensors are seen as (outer, n, inner) and normalised over n; sums and the row max are
// in double, as in the reference. Enqueue on `stream`, never synchronise; float and double.
//
//   launch_softmax<float>(/*log=*/false, {outer, n, inner}, x, y, stream);
//   launch_softmax_grad<float>(/*log=*/true, {outer, n, inner}, dy, y, dx, stream);
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/reduce_geometry.h"

namespace onnxtrain::cuda {

// y = softmax(x) (or log_softmax) over n, the row maximum subtracted first.
template <typename T>
void launch_softmax(bool log, const AxisGeometry& g, const T* x, T* y, cudaStream_t stream);

// SoftmaxGrad dx = y ⊙ (dy − Σ_n dy ⊙ y); LogSoftmaxGrad dx = dy − exp(y) ⊙ Σ_n dy.
template <typename T>
void launch_softmax_grad(bool log, const AxisGeometry& g, const T* dy, const T* y, T* dx, cudaStream_t stream);

}  // namespace onnxtrain::cuda
